"""The larger stage: a few workloads past every size the ordinary ones reach
(strategies/large.py: blocks of 16 tokens and more, budgets in the thousands, prompts of
hundreds of tokens, outputs past 256 tokens; or a hundred requests over hundreds of steps),
each with the checks of one run (the invariants after every call, L1 at the end) and
lockstep with the reference (R1) where the implementation is not the reference itself:
R1 holds every output to the reference's, which are the model's (D1 without its twin run,
the most costly of the three runs at this size).

For the bug that shows only at a size: a fixed-size history, a cap on a count, a length
or token compared with `is`, a constant where a config value belongs (issue 38).

And one marathon (issue 47): a thousand and more requests over more than 2^16 steps,
thousands finished and preempted, past the round caps a history or counter may carry; in
lockstep with the reference at every call (what schedule() and update() return, the
counters), the whole state compared every 4096th step and at the end (Workload.sample_every:
copying it at every call would cost more than the run).
"""

from __future__ import annotations

from hypothesis import Phase, given, settings

from schedcheck.drive.impl import Implementation
from schedcheck.model.workload import Workload
from schedcheck.strategies.large import big, long, marathon
from schedcheck.suite.holds import ShrinkBudget, assert_holds
from schedcheck.suite.test_properties import INVARIANTS

CHECKS = (*INVARIANTS, "R1")

# A larger workload costs about thirty ordinary ones (two runs of hundreds of steps):
# a thirtieth of the profile's examples for each shape, and never fewer than four.
EXAMPLES = max(4, settings().max_examples // 30)
# The long runs share their budget with the marathon, which is longer still (its counts
# and caps are theirs, past every round number): half as many of them.
LONG_EXAMPLES = max(2, EXAMPLES // 2)
# A shrink step here costs a run of hundreds of steps: shrinking stops after this long.
# (Nor are these workloads labelled with the behaviours they exercise, as the properties
# stage's are: labelling runs the reference once more, and would run for every candidate
# the shrinker rejects.)
SHRINKING = 20.0


_BIG, _LONG = ShrinkBudget(SHRINKING), ShrinkBudget(SHRINKING)


@settings(max_examples=EXAMPLES)
@given(workload=big())
def test_every_check_holds_on_big_configurations(impl: Implementation, workload: Workload) -> None:
    """Engine-sized blocks, pools, budgets, prompts and outputs."""
    assert_holds(impl, workload, CHECKS, _BIG)


@settings(max_examples=LONG_EXAMPLES)
@given(workload=long())
def test_every_check_holds_on_long_runs(impl: Implementation, workload: Workload) -> None:
    """A hundred short requests over hundreds of steps: hundreds finish and are preempted."""
    assert_holds(impl, workload, CHECKS, _LONG)


# A marathon's run is the stage's longest (seconds: tens of thousands of calls on each side);
# what it checks needs the reference (R1), and the contract (C1) holds on every call.
MARATHON = ("C1", "R1")
# Not shrunk: a candidate costs a run of seconds (and drawing thousands of requests), and
# what fails a marathon is its length, which no shrink takes below the cap it passes.
UNSHRUNK = [Phase.explicit, Phase.reuse, Phase.generate]


@settings(max_examples=1, phases=UNSHRUNK)
@given(workload=marathon())
def test_lockstep_holds_over_a_marathon(submission: Implementation, workload: Workload) -> None:
    """Past a thousand finished, a thousand preempted, 2^16 steps: every call as the
    reference's, every 4096th step's whole state too (`submission`: not the reference,
    which it is held to)."""
    assert_holds(submission, workload, MARATHON)
