"""Spec rules of the reference that no fixed configuration reaches, set up by hand.

With a fixed budget every running sequence is scheduled at every step (see
docs/checks.md), so phase 1 never stops with sequences left over. An engine that lowers
its token budget between steps does reach that rule; the reference must follow it.
"""

from __future__ import annotations

from schedcheck import scheduler
from tests.helpers import create_requests, create_scheduler, ids


def test_phase1_stops_at_budget_zero_and_preempts_nobody() -> None:
    """Spec, phase 1: "stop when ... budget == 0 (running sequences left unscheduled
    because budget ran out are NOT preempted)"."""
    sched = create_scheduler(scheduler, max_num_batched_tokens=3)
    seqs = create_requests(scheduler, sched, ("a1", 1, 5), ("a2", 1, 5), ("a3", 1, 5))
    assert sched.schedule() == {"a1": 1, "a2": 1, "a3": 1}
    sched.update()
    sched.max_num_batched_tokens = 2  # the engine lowers its budget
    assert sched.schedule() == {"a1": 1, "a2": 1}
    assert ids(sched.running) == ["a1", "a2", "a3"] and sched.num_preemptions == 0
    sched.update()
    a3 = seqs["a3"]
    assert (a3.status.name, a3.num_computed, a3.num_tokens) == ("RUNNING", 1, 2)
