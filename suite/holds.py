"""What every property does with one workload: run the checks, fail with the whole report."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import target
from hypothesis.control import currently_in_test_context

from harness.sandbox.impl import Implementation
from harness.verdict.report import replay_hints
from harness.verdict.verify import verify
from invariants.regression import Regression
from invariants.trace import Trace
from invariants.violation import Violation
from invariants.workload import Workload

PROGRESS = "SCHEDCHECK_PROGRESS"  # a file that gets one byte per example checked


def assert_holds(impl: Implementation, workload: Workload, checks: tuple[str, ...]) -> Trace:
    """Run `checks` on `impl`; fail with the full report and a way to replay it."""
    verdict = verify(impl, workload, checks)
    tick()
    final = verdict.trace.final()
    if final is not None and currently_in_test_context():
        target(float(final.num_preemptions), label="preemptions")  # toward storms
    if not verdict.ok:
        saved = save_failure(workload, verdict.violations[0])
        verdict.require(replay_hints(impl.label, workload, saved))
    return verdict.trace


def tick() -> None:
    """Count one example for `schedcheck check`'s progress line: a byte appended to the
    file SCHEDCHECK_PROGRESS names (one write, atomic between xdist's processes)."""
    where = os.environ.get(PROGRESS)
    if where:
        fd = os.open(where, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, b".")
        finally:
            os.close(fd)


def save_failure(workload: Workload, violation: Violation) -> Path | None:
    """Write the workload where SCHEDCHECK_SAVE_FAILURES says, one file per check, in the
    regression corpus's format. Hypothesis runs the shrunk example last: the file keeps it.
    """
    where = os.environ.get("SCHEDCHECK_SAVE_FAILURES")
    if not where:
        return None
    path = Path(where) / f"{violation.check}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(Regression(workload, violation.check, str(violation)).to_json())
    return path
