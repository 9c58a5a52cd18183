"""Every row of the spec's bug table, applied to the reference, is caught by the check its
symptom points to, on a workload small enough to read."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedcheck.drive.loader import load_impl
from schedcheck.model.workload import Workload
from schedcheck.verdict.verify import verify
from tests.workloads import EOS_SECOND, EXAMPLES, PREEMPT_WITH_QUEUE

MUTANTS = Path(__file__).resolve().parents[1] / "mutants"

BUG_TABLE: list[tuple[str, Workload, str]] = [
    ("bt_blocks_on_num_tokens", EXAMPLES["example1"], "I7"),
    ("bt_num_computed_not_reset", EXAMPLES["example2"], "I7"),
    ("bt_output_cleared_on_preemption", EXAMPLES["example2"], "I4"),
    ("bt_preempted_to_tail", PREEMPT_WITH_QUEUE, "I5"),
    ("bt_sample_before_prefill_done", EXAMPLES["example1"], "I3"),
    ("bt_phase2_continue", EXAMPLES["example3"], "F1"),
    ("bt_for_loop_over_running", EXAMPLES["example2"], "I6"),
    ("bt_schedule_returns_its_record", EXAMPLES["example1"], "A1"),
    ("bt_eos_tested_before_append", EOS_SECOND, "A1"),
]


@pytest.mark.parametrize(
    ("mutant", "workload", "check"), BUG_TABLE, ids=[m for m, _, _ in BUG_TABLE]
)
def test_bug_is_caught_by_the_check_its_symptom_points_to(
    mutant: str, workload: Workload, check: str
) -> None:
    verdict = verify(load_impl(MUTANTS / f"{mutant}.py"), workload)
    assert verdict.violations, f"{mutant} passed every check"
    assert verdict.violations[0].check == check, verdict.report()


@pytest.mark.parametrize("workload", [*EXAMPLES.values(), PREEMPT_WITH_QUEUE, EOS_SECOND])
def test_reference_passes_the_bug_table_workloads(workload: Workload) -> None:
    verdict = verify(load_impl(), workload, lockstep=True)
    assert verdict.ok, verdict.report()
