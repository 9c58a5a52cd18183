"""The catalogue's files (tests/mutants/, tests/hostile/, tests/equivalents/) as the box
loads them: standalone, with the reference written in (schedcheck/drive/standalone.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from schedcheck import faults
from schedcheck.cli.main import main
from schedcheck.drive.standalone import (
    found_by_the_larger_stage,
    found_by_the_marathon,
    found_by_two_schedulers,
    inline_reference,
    reference_file,
    reference_source,
    standalone,
)
from schedcheck.grading.grade import GROUP_OF, grade_one
from schedcheck.grading.report import GroupState, Verdict
from schedcheck.sandbox.process import Limits

__all__ = [
    "HANGING",
    "ROOT",
    "check_fails_naming",
    "expected_checks",
    "found_by_the_larger_stage",
    "found_by_the_marathon",
    "found_by_two_schedulers",
    "grade_fails_as_check_did",
    "inline_reference",
    "reference_file",
    "reference_source",
    "standalone",
]

ROOT = Path(__file__).resolve().parent.parent
# The mutants whose bug is a hang: run isolated (a call timeout stops them), never in
# process, where their loop would be the test run's own.
HANGING = frozenset(
    {
        "infinite_loop_full_house",
        "hang_phase1_retry_never_preempts",
        "hang_phase2_admits_without_progress",
        "hang_update_frees_block_by_block",
    }
)


def expected_checks(path: Path) -> set[str]:
    """The checks a catalogued file's docstring says catch it: "Caught by I1 or I7."."""
    found = re.search(r"Caught by ([^.]*)\.", path.read_text())
    assert found, f"{path.name}: the docstring must say 'Caught by <check>.'"
    return set(re.findall(r"\b[A-Z]\d\b", found.group(1)))


# What only the checker's own faults print: none of it may appear in a submission's FAIL.
OURS = ("FailedHealthCheck", "INTERNALERROR", "UsageError", "schedcheck itself failed")


def check_fails_naming(path: Path, capfd: pytest.CaptureFixture[str]) -> set[str]:
    """`schedcheck check PATH` (the default profile, one worker): FAIL, naming a check the
    file's docstring names, with nothing of the checker's own faults in its output or
    its log, every exception pytest shows a check's verdict. Returns the checks named."""
    code = main(["check", str(path), "-n", "0", "--call-timeout", "1"])
    out, err = capfd.readouterr()
    assert code == faults.FAIL, out + err
    named = re.search(r"^FAIL .*?: ([A-Z]\d(?:, [A-Z]\d)*)$", out, re.M)
    assert named, out
    checks = set(named.group(1).split(", "))
    assert checks & expected_checks(path), out
    # pytest's own output is in the log (`full log: PATH`), not on the terminal.
    log = Path(re.findall(r"^full log: (.+)$", out, re.M)[-1]).read_text()
    assert not any(sign in out + err + log for sign in OURS), out + err + log
    shown = set(re.findall(r"^E\s+([\w.]+(?:Error|Exception|Failed|Check\w*)):", log, re.M))
    assert shown == {"schedcheck.faults.CheckFailed"}, shown
    return checks


def grade_fails_as_check_did(path: Path, named: set[str]) -> None:
    """`schedcheck grade` fails PATH too, by the group of a check `check` named or naming
    one of them (issue 56: grade makes every run check's stages make; a worked example's
    failure is the examples group's, reported with its check). A budget, for hung calls."""
    entry = grade_one(str(path), Limits(call_timeout=1), budget=60.0)
    failing = {group for group, state in entry.checks.items() if state is GroupState.FAIL}
    reported = {f.check for f in entry.failures}
    assert entry.verdict is Verdict.FAIL, entry
    assert {GROUP_OF[c] for c in named} & failing or named & reported, entry


if __name__ == "__main__":  # python -m tests.catalogue FILE...: print their standalone paths
    import sys

    for argument in sys.argv[1:]:
        print(standalone(Path(argument)))
