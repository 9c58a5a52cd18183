"""The property suite: Hypothesis drives the implementation under test (`--impl`).

Each property reports the behaviours its workload exercises with `hypothesis.event`
(see them with `--hypothesis-show-statistics`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import event, given, target

from harness.impl import Implementation
from harness.loader import REFERENCE
from harness.report import replay_hints
from harness.verify import verify
from invariants.workload import Workload
from strategies.coverage import observe
from strategies.workloads import any_workloads

INVARIANTS = ("C1", "I1", "I2", "I3", "I4", "I5", "I6", "I7", "A1", "F1", "L1")


def label(workload: Workload) -> None:
    for behaviour in sorted(observe(workload)):
        event(behaviour)


def assert_holds(impl: Implementation, workload: Workload, checks: tuple[str, ...]) -> None:
    verdict = verify(impl, workload, checks)
    final = verdict.trace.final()
    if final is not None:
        target(float(final.num_preemptions), label="preemptions")  # toward storms
    if not verdict.ok:
        saved = save_failure(workload, verdict.violations[0].check)
        hints = replay_hints(impl.label, workload, saved)
        raise AssertionError(f"\n{verdict.report()}\n\n{hints}")


def save_failure(workload: Workload, check: str) -> Path | None:
    """Write the workload where SCHEDCHECK_SAVE_FAILURES says, one file per check.

    Hypothesis runs the shrunk example last, so the file ends up holding it.
    """
    where = os.environ.get("SCHEDCHECK_SAVE_FAILURES")
    if not where:
        return None
    path = Path(where) / f"{check}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(workload.to_json())
    return path


@given(workload=any_workloads())
def test_invariants_hold_at_every_step(impl: Implementation, workload: Workload) -> None:
    """I1-I7, A1, F1 after every call; L1 at the end; no contract failure (C1)."""
    label(workload)
    assert_holds(impl, workload, INVARIANTS)


@given(workload=any_workloads())
def test_preemption_never_changes_the_output(impl: Implementation, workload: Workload) -> None:
    """D1: outputs are the model's, and a run with blocks for everything agrees."""
    label(workload)
    assert_holds(impl, workload, ("C1", "D1"))


@given(workload=any_workloads())
def test_lockstep_with_the_reference(impl: Implementation, workload: Workload) -> None:
    """R1: every call returns and leaves what the reference's does."""
    if impl.label == REFERENCE:
        pytest.skip("R1 compares an implementation with the reference: here they are one")
    label(workload)
    assert_holds(impl, workload, ("C1", "R1"))
