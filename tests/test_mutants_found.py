"""The strategies find every catalogued bug with no help, and the shrunk counterexample
fails first on the check the bug's symptom points to.

This checks the suite itself: it searches with its own fixed, derandomized settings and
does not depend on `--impl`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, find, settings

from harness.loader import load_impl
from harness.verify import verify
from invariants.workload import Workload
from strategies.workloads import any_workloads

MUTANTS = Path(__file__).parent / "mutants"
SEARCH = settings(
    max_examples=2000,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)

EXPECTED = {
    "bt_blocks_on_num_tokens": {"I7"},
    "bt_num_computed_not_reset": {"I7"},
    "bt_output_cleared_on_preemption": {"I4"},
    "bt_preempted_to_tail": {"I5", "F1"},
    "bt_sample_before_prefill_done": {"I3"},
    "bt_phase2_continue": {"F1"},
    "bt_for_loop_over_running": {"I6"},
    "bt_schedule_returns_its_record": {"A1"},
    "bt_eos_tested_before_append": {"A1"},
    "eos_zero_ignored": {"A1"},
    "second_preemption_keeps_num_computed": {"I7"},
}


def test_every_mutant_file_has_an_expectation() -> None:
    assert {p.stem for p in MUTANTS.glob("*.py")} == set(EXPECTED)


@pytest.mark.parametrize("mutant", sorted(EXPECTED))
def test_strategies_find_and_shrink_the_bug(mutant: str) -> None:
    impl = load_impl(MUTANTS / f"{mutant}.py")

    def fails(workload: Workload) -> bool:
        return not verify(impl, workload).ok

    workload = find(any_workloads(), fails, settings=SEARCH)
    verdict = verify(impl, workload)
    assert verdict.violations[0].check in EXPECTED[mutant], verdict.report()
    assert len(workload.requests) <= 3, verdict.report()
