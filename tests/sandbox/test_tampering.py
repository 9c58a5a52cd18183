"""A submission cannot turn its FAIL into schedcheck's `error` (issue 26).

Each `tests/hostile/tamper_*.py` is a buggy scheduler plus one trick against the worker
that runs it (schedcheck's functions, classes, module objects or code replaced; the
standard library it replies with; its clocks; forged replies; exceptions from `__del__`).
Whatever the trick does, the verdict stays the submission's: a FAIL naming a check, never
a pass and never schedcheck's own error, in every mode. Whose fault an error in the worker
is, is decided in the parent (schedcheck/sandbox/process.py, `_theirs`); a fault that really
is ours stays ours.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from schedcheck import faults
from schedcheck.cli.main import main
from schedcheck.drive.isolated import Isolated, reference_copy
from schedcheck.faults import CheckerError, SubmissionError
from schedcheck.grading.grade import grade_one
from schedcheck.grading.report import Verdict
from schedcheck.sandbox.process import Limits
from schedcheck.verdict.verify import verify
from tests.catalogue import inline_reference, standalone
from tests.helpers import ROOT, rotation_day, run_pytest
from tests.workloads import EXAMPLES

HOSTILE = ROOT / "tests" / "hostile"
TRICKS = sorted(p.stem for p in HOSTILE.glob("tamper_*.py"))
MARKER = "# --- the buggy scheduler"
# A few mutants, each with an example it fails: the trick goes in front of each.
MUTANTS = {
    "bt_output_cleared_on_preemption": "example2",
    "blocks_leaked_on_finish": "example2",
    "token_budget_off_by_one": "example1",
}
# Tricks the worker's binding defeats (schedcheck/sandbox/worker.py, `bind`): the run goes on
# as if nothing happened, so the verdict is the mutant's own check.
HARMLESS = {"tamper_clock", "tamper_del", "tamper_stdout", "tamper_sys_modules"}
FAST = Limits(call_timeout=1.0, memory=256 << 20)
OURS = ("FailedHealthCheck", "INTERNALERROR", "UsageError", "schedcheck itself failed")


def with_mutant(trick: str, mutant: str, folder: Path) -> Path:
    """The trick's file with its buggy scheduler swapped for `mutant`, standalone."""
    head = (HOSTILE / f"{trick}.py").read_text().split(MARKER)[0]
    tail = (ROOT / "tests" / "mutants" / f"{mutant}.py").read_text()
    path = folder / "p07_scheduler.py"
    path.write_text(inline_reference(head + "\n" + tail))
    return path


def verdict_of(path: Path, example: str) -> str:
    """The first check the submission fails on the example: C1 when it cannot even start
    (a SubmissionError, the contract's FAIL). A CheckerError escapes: it must not happen."""
    worker = Isolated(path, FAST)
    try:
        verdict = verify(worker, EXAMPLES[example])
    except SubmissionError:
        return "C1"
    finally:
        worker.stop()
    assert not verdict.ok, f"{path} passed"
    return verdict.violations[0].check


def test_every_trick_has_the_marker_and_says_what_it_does() -> None:
    assert len(TRICKS) >= 10
    for trick in TRICKS:
        text = (HOSTILE / f"{trick}.py").read_text()
        assert MARKER in text and text.startswith('"""Tampering: '), trick


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
@pytest.mark.parametrize("trick", TRICKS)
def test_a_trick_never_turns_a_mutants_fail_into_a_pass_or_our_error(
    trick: str, mutant: str, tmp_path: Path
) -> None:
    example = MUTANTS[mutant]
    plain = verdict_of(standalone(ROOT / "tests" / "mutants" / f"{mutant}.py"), example)
    got = verdict_of(with_mutant(trick, mutant, tmp_path), example)
    if trick in HARMLESS:
        assert got == plain, (trick, mutant, got, plain)
    else:
        assert re.fullmatch(r"[A-Z]\d", got), got


def test_the_first_report_is_a_fail_naming_c1(capfd: pytest.CaptureFixture[str]) -> None:
    """Issue 26's report: every function of schedcheck's replaced made `check` exit 3."""
    code = main(["check", str(standalone(HOSTILE / "tamper_functions.py")), "-n", "0"])
    out, err = capfd.readouterr()
    assert code == faults.FAIL, out + err
    assert "did your module change modules other than its own" in out
    assert not any(sign in out + err for sign in OURS), out + err


def test_a_fault_that_is_ours_stays_ours() -> None:
    """A worker whose own code fails (tests/broken_worker.py) fails on the reference too: the
    referee cannot clear it, so it is schedcheck's error, never the submission's FAIL."""
    worker = Isolated(reference_copy(), FAST, worker="tests.broken_worker")
    try:
        with pytest.raises(CheckerError, match="injected: the worker's own code"):
            verify(worker, EXAMPLES["example2"])
    finally:
        worker.stop()


def _check(path: Path, tmp: Path) -> None:
    assert main(["check", str(path), "-n", "0", "--call-timeout", "1"]) == faults.FAIL


def _gradescope(path: Path, tmp: Path) -> None:
    results = tmp / "results.json"
    assert main(["check", str(path), "--gradescope", str(results)]) == faults.FAIL
    written = json.loads(results.read_text())
    assert written["score"] < 100 and "failed" in {t["status"] for t in written["tests"]}


def _grade(path: Path, tmp: Path) -> None:
    student = tmp / "class" / "student"
    student.mkdir(parents=True)
    shutil.copy(path, student / "p07_scheduler.py")
    out = tmp / "out"
    assert main(["grade", str(tmp / "class"), "--out", str(out), "-j", "1", "--sample", "20"]) == 0
    (entry,) = json.loads((out / "report.json").read_text())["submissions"]
    assert entry["verdict"] == "fail", entry


def _pytest_impl(path: Path, tmp: Path) -> None:
    done = run_pytest(
        "--impl", str(path), "-k", "test_lockstep or test_worked_example", env={"CI": "true"}
    )
    assert done.returncode == faults.FAIL, done.stdout + done.stderr
    assert not any(sign in done.stdout + done.stderr for sign in OURS), done.stdout


def _exhaustive(path: Path, tmp: Path) -> None:
    args = ["check", str(path), "--exhaustive", "--scope", "smoke", "-n", "1"]
    assert main(args) == faults.FAIL


MODES = {
    "check": _check,
    "gradescope": _gradescope,
    "grade": _grade,
    "pytest --impl": _pytest_impl,
    "exhaustive": _exhaustive,
}
PAIRS = [(t, m) for t in TRICKS for m in MODES]
# Every trick in every mode under -m costly; a rotating few in the default run.
TODAY = {PAIRS[(5 * rotation_day()) % len(PAIRS)]}


@pytest.mark.parametrize(
    ("trick", "mode"),
    [pytest.param(t, m, marks=() if (t, m) in TODAY else pytest.mark.costly) for t, m in PAIRS],
)
def test_every_mode_fails_the_tampering_submission(trick: str, mode: str, tmp_path: Path) -> None:
    path = standalone(HOSTILE / f"{trick}.py", tmp_path / "file")
    MODES[mode](path, tmp_path)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_replies_forged_or_left_over_never_mix_with_the_next_command() -> None:
    """tamper_json makes every message its worker sends a forged end of run: a stream of
    unasked replies. Replies carry their command's number, so a stale or forged one is no
    reply; and a command the worker does not read in time is its failure, never a hang
    (before, `--gradescope` hung on it: both ends blocked writing; then its shrink was
    flaky, our error)."""
    entry = grade_one(str(standalone(HOSTILE / "tamper_json.py")), FAST, budget=120, size=20)
    assert entry.verdict is Verdict.FAIL, entry.failures
