"""The larger stage: a few workloads past every size the ordinary ones reach
(strategies/large.py: blocks of 16 tokens and more, budgets in the thousands, prompts of
hundreds of tokens, outputs past 256 tokens; or a hundred requests over hundreds of steps),
each with the checks of one run (the invariants after every call, L1 at the end) and
lockstep with the reference (R1) where the implementation is not the reference itself:
R1 holds every output to the reference's, which are the model's (D1 without its twin run,
the most costly of the three runs at this size).

For the bug that shows only at a size: a fixed-size history, a cap on a count, a length
or token compared with `is`, a constant where a config value belongs (issue 38).
"""

from __future__ import annotations

from hypothesis import given, settings

from schedcheck.drive.impl import Implementation
from schedcheck.model.workload import Workload
from schedcheck.strategies.large import big, long
from schedcheck.suite.holds import ShrinkBudget, assert_holds
from schedcheck.suite.test_properties import INVARIANTS

CHECKS = (*INVARIANTS, "R1")

# A larger workload costs about thirty ordinary ones (two runs of hundreds of steps):
# a thirtieth of the profile's examples for each shape, and never fewer than four.
EXAMPLES = max(4, settings().max_examples // 30)
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


@settings(max_examples=EXAMPLES)
@given(workload=long())
def test_every_check_holds_on_long_runs(impl: Implementation, workload: Workload) -> None:
    """A hundred short requests over hundreds of steps: hundreds finish and are preempted."""
    assert_holds(impl, workload, CHECKS, _LONG)
