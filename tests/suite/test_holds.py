"""A larger stage's shrinking stops once its budget is spent: candidates are rejected
unrun, and the failures already found still run (Hypothesis replays the smallest last)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.errors import UnsatisfiedAssumption

from schedcheck.drive.impl import reference
from schedcheck.suite.holds import ShrinkBudget, assert_holds
from tests.workloads import EXAMPLES


def test_nothing_is_rejected_before_a_failure_nor_within_the_budget() -> None:
    budget = ShrinkBudget(60.0)
    workload = EXAMPLES["example1"]
    assert not budget.spent(workload)
    budget.failed(workload)
    assert not budget.spent(EXAMPLES["example2"])


@given(st.just(None))  # reject() belongs in a property
def test_once_spent_only_the_failures_found_run(_: None) -> None:
    budget = ShrinkBudget(0.0)
    failing, other = EXAMPLES["example1"], EXAMPLES["example2"]
    budget.failed(failing)
    assert budget.spent(other) and not budget.spent(failing)
    with pytest.raises(UnsatisfiedAssumption):
        assert_holds(reference(), other, ("C1",), budget)
    assert assert_holds(reference(), failing, ("C1",), budget).failure is None
