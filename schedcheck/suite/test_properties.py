"""The property suite: Hypothesis drives the implementation under test (`--impl`).

Each property reports the behaviours its workload exercises with `hypothesis.event`
(see them with `--hypothesis-show-statistics`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hypothesis import event, example, given, settings, target

from schedcheck.drive.impl import Implementation
from schedcheck.invariants.catalogue import ids
from schedcheck.model.regression import load_corpus
from schedcheck.model.workload import Workload
from schedcheck.strategies.coverage import observation
from schedcheck.strategies.workloads import any_workloads, pairs
from schedcheck.suite.holds import assert_holds, assert_pair_holds

# The checks of one run alone (C1, I1-I8, A1, F1, L1): all but those that need a second run,
# the twin (D1) or the reference (R1), which have properties of their own below.
INVARIANTS = ids(lambda c: not c.needs_twin and not c.needs_reference)
DIFFERENTIAL = ("C1", "D1")
LOCKSTEP = ("C1", "R1")


CORPUS = load_corpus(Path(__file__).parent / "regressions")


def replaying_the_corpus(test: Callable[..., None]) -> Callable[..., None]:
    """Every regression of schedcheck/suite/regressions/ as an explicit example: run before any
    random generation, on every run."""
    for regression in reversed(CORPUS):
        test = example(workload=regression.workload)(test)
    return test


def label(workload: Workload) -> None:
    """The behaviours the workload exercises, as events; and the search's aim, toward
    storms: the reference's preemptions, never the submission's, so that what is tried
    depends on nothing the submission does (`schedcheck grade` tries the same)."""
    behaviours, preemptions = observation(workload)
    for behaviour in sorted(behaviours):
        event(behaviour)
    target(float(preemptions), label="preemptions")


@replaying_the_corpus
@given(workload=any_workloads())
def test_invariants_hold_at_every_step(impl: Implementation, workload: Workload) -> None:
    """I1-I8, A1, F1 after every call; L1 at the end; no contract failure (C1)."""
    label(workload)
    assert_holds(impl, workload, INVARIANTS)


@replaying_the_corpus
@given(workload=any_workloads())
def test_preemption_never_changes_the_output(impl: Implementation, workload: Workload) -> None:
    """D1: outputs are the model's, and a run with blocks for everything agrees."""
    label(workload)
    assert_holds(impl, workload, DIFFERENTIAL)


@replaying_the_corpus
@given(workload=any_workloads())
def test_lockstep_with_the_reference(submission: Implementation, workload: Workload) -> None:
    """R1: every call returns and leaves what the reference's does."""
    label(workload)
    assert_holds(submission, workload, LOCKSTEP)


# The checks of one run and lockstep with the reference, on each of two schedulers (no
# twin run: D1 is the properties' above).
TWO_ALIVE = (*INVARIANTS, "R1")


# A third of the profile's examples: a pair costs two runs and two reference runs.
@settings(max_examples=max(10, settings().max_examples // 3))
@given(pair=pairs())
def test_two_schedulers_alive_at_once(
    impl: Implementation, pair: tuple[Workload, Workload]
) -> None:
    """Issue 47: two schedulers of different configurations in one process, A built whole
    before B, their calls interleaved step by step; each holds its invariants and equals
    the reference's run of its own workload. State kept at module or class level (a block
    size, a pool counter, a cache) is right for one scheduler and wrong for two."""
    assert_pair_holds(impl, pair, TWO_ALIVE)
