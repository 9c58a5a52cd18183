"""pyproject.toml's mutmut section names test files that exist and collect tests: the
`mutmut run` docs/mutants.md documents finds them (it found none once they had moved)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.helpers import ROOT


def selection() -> list[str]:
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(r"pytest_add_cli_args_test_selection = \[(.*?)\]", text, re.S)
    assert found, "pyproject.toml has no mutmut test selection"
    return re.findall(r'"([^"]+)"', found.group(1))


def test_the_mutmut_selection_collects_the_reference_tests() -> None:
    paths = selection()
    assert paths and all((ROOT / p).is_file() for p in paths), paths
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert collected.returncode == 0, collected.stdout + collected.stderr
    for path in paths:  # each file contributes tests
        assert f"{path}::" in collected.stdout, (path, collected.stdout[-2000:])
