"""`schedcheck fuzz`: a campaign until the time is up, progress lines, counterexamples kept
in the regression corpus's format."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedcheck.model.regression import Regression
from schedcheck.sandbox.process import Limits
from schedcheck.search import fuzz
from tests.catalogue import standalone
from tests.helpers import ROOT


def run_campaign(
    path: Path, out: Path, monkeypatch: pytest.MonkeyPatch, seconds: float = 2.0
) -> tuple[int, list[str]]:
    monkeypatch.setattr(fuzz, "PROGRESS_EVERY", 0.5)
    lines: list[str] = []
    found = fuzz.campaign(path, seconds, out, Limits(call_timeout=0.5), lines.append, seed=0)
    return found, lines


def test_a_campaign_keeps_what_it_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mutant = standalone(ROOT / "tests" / "mutants" / "bt_phase2_continue.py")
    found, lines = run_campaign(mutant, tmp_path, monkeypatch)
    assert found >= 1
    saved = sorted(tmp_path.glob("fuzz-*.json"))
    assert len(saved) == found
    regression = Regression.from_json(saved[0].read_text())
    assert regression.check and regression.note.startswith(regression.check)
    assert lines[-1].startswith("done: ") and f"{found} failures" in lines[-1]


def test_the_reference_survives_a_campaign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    correct = ROOT / "tests" / "equivalents" / "one_pass.py"
    found, lines = run_campaign(correct, tmp_path, monkeypatch)
    assert found == 0 and list(tmp_path.glob("*.json")) == []
    progress = [line for line in lines if line.endswith("0 failures")]
    assert len(progress) >= 3  # every 0.5 s here, every 10 s for real
    assert "behaviours" in progress[0]
