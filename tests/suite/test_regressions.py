"""The regression corpus still has teeth: each file named for a catalogued mutant still
makes that mutant fail first on the check it recorded; the reference passes them all."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedcheck.drive.isolated import Isolated
from schedcheck.invariants.checks import check_trace
from schedcheck.model.regression import Regression
from schedcheck.sandbox.process import Limits
from schedcheck.verdict.verify import verify
from tests.catalogue import standalone
from tests.helpers import reference_trace

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT.parent / "schedcheck" / "suite" / "regressions").glob("*.json"))
FROM_MUTANTS = [p for p in FILES if (ROOT / "mutants" / f"{p.stem}.py").exists()]


def test_the_corpus_is_not_empty() -> None:
    assert len(FILES) >= 25


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_regression_says_what_it_caught(path: Path) -> None:
    regression = Regression.from_json(path.read_text())
    assert regression.note and regression.check


@pytest.mark.parametrize("path", FROM_MUTANTS, ids=[p.stem for p in FROM_MUTANTS])
def test_regression_still_catches_its_mutant(path: Path) -> None:
    regression = Regression.from_json(path.read_text())
    mutant = ROOT / "mutants" / f"{path.stem}.py"
    worker = Isolated(standalone(mutant), Limits(call_timeout=0.5))
    try:
        verdict = verify(worker, regression.workload)
    finally:
        worker.stop()
    assert verdict.violations and verdict.violations[0].check == regression.check


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_reference_passes_it(path: Path) -> None:
    trace = reference_trace(Regression.from_json(path.read_text()).workload)
    assert check_trace(trace) == []
