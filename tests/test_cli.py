"""The `schedcheck` console script."""

from __future__ import annotations

import pytest

from harness.cli import main


def test_help_prints_usage_and_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: schedcheck")


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: schedcheck" in capsys.readouterr().err
