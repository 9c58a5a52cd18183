"""`schedcheck check --gradescope`: a results.json Gradescope accepts (the keys and types its
autograder specification requires), full marks for a correct file, partial credit by check
group for a wrong one, and no file at all when the fault is ours."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from schedcheck import faults
from schedcheck.cli import check as check_module
from schedcheck.cli.main import main
from schedcheck.grading.gradescope import VISIBILITY, shares
from schedcheck.grading.report import Entry, Failure, Verdict
from tests.catalogue import standalone
from tests.helpers import ROOT

EQUIVALENT = ROOT / "tests" / "equivalents" / "one_pass.py"
MUTANT = standalone(ROOT / "tests" / "mutants" / "preempts_oldest.py")
NUMBER = (int, float)


def assert_gradescope_schema(results: dict[str, Any]) -> None:
    assert isinstance(results["score"], NUMBER)
    assert isinstance(results["execution_time"], int) and isinstance(results["output"], str)
    assert results["visibility"] in VISIBILITY
    assert results["stdout_visibility"] in VISIBILITY
    assert isinstance(results["tests"], list) and results["tests"]
    for test in results["tests"]:
        assert isinstance(test["name"], str) and isinstance(test["number"], str)
        assert isinstance(test["score"], NUMBER) and isinstance(test["max_score"], NUMBER)
        assert 0 <= test["score"] <= test["max_score"]
        assert test["status"] in ("passed", "failed") and isinstance(test["output"], str)
        assert test["visibility"] in VISIBILITY
    # Exactly, in the order Gradescope adds them and in any other (issue 37)
    maxima = [t["max_score"] for t in results["tests"]]
    assert sum(maxima) == 100 and sum(reversed(maxima)) == 100 and max(maxima) - min(maxima) < 0.1
    assert sum(t["score"] for t in results["tests"]) == results["score"]


@pytest.mark.heavy
def test_a_correct_submission_gets_full_marks(tmp_path: Path) -> None:
    written = tmp_path / "results.json"
    assert (
        main(["check", str(EQUIVALENT), "--gradescope", str(written), "--sample", "40"])
        == faults.PASS
    )
    results = json.loads(written.read_text())
    assert_gradescope_schema(results)
    assert results["score"] == 100
    assert {t["status"] for t in results["tests"]} == {"passed"}


@pytest.mark.costly  # 25 s: the failing groups' shrinking; the tampering pairs rotate it in
def test_a_mutant_gets_partial_credit_and_a_replayable_counterexample(tmp_path: Path) -> None:
    written = tmp_path / "results.json"
    assert (
        main(["check", str(MUTANT), "--gradescope", str(written), "--sample", "40"]) == faults.FAIL
    )
    results = json.loads(written.read_text())
    assert_gradescope_schema(results)
    assert 0 < results["score"] < 100
    failed = [t for t in results["tests"] if t["status"] == "failed"]
    shown = next(t["output"] for t in failed if "{" in t["output"])
    saved = tmp_path / "failing.json"
    saved.write_text(shown[shown.index("{") :])
    assert main(["check", str(MUTANT), "--replay", str(saved)]) == faults.FAIL


def test_our_own_fault_writes_no_score(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> Entry:
        return Entry(str(EQUIVALENT), Verdict.ERROR, {}, (Failure("", "grader broke"),))

    monkeypatch.setattr(check_module, "grade_one", broken)
    written = tmp_path / "results.json"
    assert main(["check", str(EQUIVALENT), "--gradescope", str(written)]) == faults.INTERNAL
    assert not written.exists()


@pytest.mark.parametrize("points", [100.0, 10.0, 12.5, 33.3, 7.0, 1.0])
@pytest.mark.parametrize("groups", [1, 7, 15, 16])
def test_the_shares_add_up_to_the_points_exactly(points: float, groups: int) -> None:
    parts = shares(points, groups)
    assert len(parts) == groups and sum(parts) == points and sum(sorted(parts)) == points
    assert max(parts) - min(parts) < 0.02 * points / groups  # near-equal
