"""A larger stage's shrinking stops once its budget is spent: candidates are rejected
unrun, and the failures already found still run (Hypothesis replays the smallest last).
And grade's narrowing of a test to one group's checks (issue 56)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.errors import UnsatisfiedAssumption

from schedcheck.drive.impl import InProcess, reference
from schedcheck.drive.loader import load_impl
from schedcheck.faults import CheckFailed
from schedcheck.invariants.violation import Violation
from schedcheck.model.workload import Config, Request, Workload
from schedcheck.suite.holds import (
    FOUND,
    ORDER,
    Failing,
    Narrowed,
    ShrinkBudget,
    assert_holds,
    failed,
    found,
    give_way,
    narrowed,
    only,
    running,
)
from tests.catalogue import standalone
from tests.helpers import ROOT
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


def test_grade_narrows_a_test_to_one_groups_checks_and_keeps_its_failures() -> None:
    """Inside `narrowed`, a test checks only the group's checks, asks grade's budget
    before each example, and notes each failing run; outside, nothing of it."""
    stops: list[int] = []
    narrowing = Narrowed(frozenset({"I1"}), lambda: stops.append(1))
    violation = Violation("I1", 1, "schedule()", "over the pool")
    with narrowed(narrowing):
        assert only(("C1", "I1", "R1")) == ("I1",)
        give_way()
        failed(Failing(EXAMPLES["example1"], None, violation), EXAMPLES["example1"])
    assert only(("C1", "I1")) == ("C1", "I1")
    give_way()
    failed(Failing(EXAMPLES["example2"], None, violation), EXAMPLES["example2"])
    assert stops == [1] and narrowing.failing == [Failing(EXAMPLES["example1"], None, violation)]


def test_a_narrowed_property_fails_only_by_the_groups_checks() -> None:
    """The reference never fails; a file that breaks I8 fails a property narrowed to I8,
    and passes one narrowed to I1 (what the narrowed search relies on)."""
    ignores = InProcess(load_impl(standalone(ROOT / "tests/mutants/max_num_seqs_ignored.py")))
    one_seat = Config(num_blocks=2, block_size=1, max_num_seqs=1, max_num_batched_tokens=2)
    workload = Workload(one_seat, (Request("a1", 1, 1), Request("a2", 1, 1)))
    with narrowed(Narrowed(frozenset({"I8"}))) as narrowing, pytest.raises(CheckFailed):
        assert_holds(ignores, workload, ("C1", "I1", "I8"))
    assert [f.violation.check for f in narrowing.failing] == ["I8"]
    with narrowed(Narrowed(frozenset({"I1"}))):
        assert_holds(ignores, workload, ("C1", "I1", "I8"))


@pytest.fixture
def a_check_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """What `schedcheck check` sets for its stages (FOUND, ORDER); the running test named
    by each test itself, and forgotten after it."""
    monkeypatch.setenv(FOUND, str(tmp_path))
    monkeypatch.setenv(ORDER, "test_seed_examples.py! test_properties.py test_large.py")
    try:
        yield
    finally:
        running("", "")


PROPERTY = "schedcheck/suite/test_properties.py::"


@pytest.mark.usefixtures("a_check_run")
def test_a_hang_makes_every_other_test_give_way() -> None:
    """Issue 54: one test's hang is shrunk, not three at once: once a test says its run
    hung, every other test (of any stage) is skipped before its next example; the test
    that hung goes on; a failure that is no hang stops no test of its own stage."""
    first = PROPERTY + "test_invariants_hold_at_every_step"
    other = PROPERTY + "test_lockstep_with_the_reference"
    running("test_properties.py", first)
    found()  # a failure, no hang: the other property goes on
    running("test_properties.py", other)
    give_way()
    running("test_properties.py", first)
    found(hang=True)
    give_way()  # the one that hung goes on shrinking
    running("test_properties.py", other)
    with pytest.raises(pytest.skip.Exception, match="hang"):
        give_way()


@pytest.mark.usefixtures("a_check_run")
def test_two_schedulers_give_way_to_a_failure_of_one() -> None:
    """The property of two schedulers alive at once is a second view of its stage: once
    another property found a failure, it is skipped; the others are not (by it or by each
    other)."""
    one = PROPERTY + "test_invariants_hold_at_every_step"
    two = PROPERTY + "test_two_schedulers_alive_at_once"
    running("test_properties.py", two)
    give_way(second_view=True)  # nothing found yet
    found()
    running("test_properties.py", one)
    give_way()  # the pair's failure stops no other property
    found()
    running("test_properties.py", two)
    with pytest.raises(pytest.skip.Exception, match="another test of this stage"):
        give_way(second_view=True)
