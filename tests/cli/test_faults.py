"""Our own faults are never a verdict: `schedcheck check` exits 3 with one paragraph saying
so, `schedcheck grade` gives verdict `error`; only a check that fired is a FAIL.

Faults are injected into the checker itself: a check that raises, a Hypothesis health
check, a pytest usage error, a worker that cannot start.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from schedcheck import faults
from schedcheck.cli.main import main
from schedcheck.faults import CheckFailed, verdict_checks
from schedcheck.grading.grade import grade_one
from schedcheck.grading.report import Verdict
from schedcheck.sandbox.process import Limits
from tests.helpers import ROOT

CORRECT = ROOT / "tests" / "equivalents" / "one_pass.py"
MESSAGE = "schedcheck itself failed"
NOT_A_VERDICT = "This is not a verdict on your submission"


def check_with(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`schedcheck check` on a correct file, in a process of its own, `env` added."""
    return subprocess.run(
        [sys.executable, "-m", "schedcheck", "check", str(CORRECT), "-n", "0", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        # tests.inject_fault is this checkout's: importable from its root
        env={**os.environ, "CI": "true", "PYTHONPATH": str(ROOT), **env},
    )


@pytest.mark.heavy
@pytest.mark.parametrize(
    ("env", "shows"),
    [
        (
            {"PYTEST_ADDOPTS": "-p tests.inject_fault", "SCHEDCHECK_INJECT": "check"},
            "failed for a reason of our own",
        ),
        (
            {"PYTEST_ADDOPTS": "-p tests.inject_fault", "SCHEDCHECK_INJECT": "health"},
            "failed for a reason of our own",
        ),
        ({"PYTEST_ADDOPTS": "--no-such-option"}, "pytest exit status 4"),
    ],
    ids=["a-check-raises", "a-health-check", "a-usage-error"],
)
def test_our_fault_in_the_test_run_exits_3(env: dict[str, str], shows: str) -> None:
    done = check_with(env)
    assert done.returncode == faults.INTERNAL, done.stdout + done.stderr
    assert MESSAGE in done.stderr and NOT_A_VERDICT in done.stderr and shows in done.stderr
    assert not re.search(r"^(FAIL|PASS) ", done.stdout, re.M)  # no verdict at all


@pytest.mark.costly  # a whole `check` (17 s); every other mode's passes are in test_equivalents
def test_the_same_run_without_the_fault_passes() -> None:
    """The injection above is what made those runs fail: without it, the file passes."""
    done = check_with({"PYTEST_ADDOPTS": "-p tests.inject_fault"})
    assert done.returncode == faults.PASS, done.stdout + done.stderr


def test_a_worker_that_cannot_start_is_ours(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "executable", "/bin/false")  # the worker's interpreter
    assert (
        main(
            ["check", str(CORRECT), "--replay", str(ROOT / "schedcheck" / "suite" / "regressions")]
        )
        == 3
    )
    err = capsys.readouterr().err
    assert MESSAGE in err and "WorkerError" in err and "before it read the submission" in err


def test_grade_agrees_a_fault_of_ours_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "/bin/false")
    entry = grade_one(str(CORRECT), Limits(), budget=60, size=5)
    assert entry.verdict is Verdict.ERROR, entry
    assert "before it read the submission" in entry.failures[0].message


class Group(Exception):
    """Shaped like an ExceptionGroup (Hypothesis raises one for several bugs or a flaky
    failure; the builtin needs Python 3.11, schedcheck supports 3.10)."""

    def __init__(self, *members: BaseException) -> None:
        super().__init__("group")
        self.exceptions = members


def test_only_check_failures_are_verdicts() -> None:
    assert verdict_checks(CheckFailed("I1", "report")) == ["I1"]
    both = Group(CheckFailed("I1", "a"), Group(CheckFailed("F1", "b")))
    assert verdict_checks(both) == ["I1", "F1"]
    mixed = Group(CheckFailed("I1", "a"), RuntimeError("ours"))
    assert verdict_checks(mixed) is None
    assert verdict_checks(AssertionError("a table value of the reference")) is None


def test_an_unreadable_or_infeasible_replay_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "infeasible.json"
    bad.write_text(
        '{"config": {"num_blocks": 1, "block_size": 1, "max_num_seqs": 1,'
        ' "max_num_batched_tokens": 4}, "requests": [{"seq_id": "a1", "prompt_len": 5,'
        ' "max_tokens": 1}]}'
    )
    assert main(["check", str(CORRECT), "--replay", str(bad)]) == faults.USAGE
