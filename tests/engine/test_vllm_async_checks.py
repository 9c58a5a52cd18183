"""E11 and E12, the checks of vLLM's async scheduling, on a run of vLLM 0.33.0's real
AsyncScheduler in mode async-v1 recorded here (tests/engine_subjects/vllm/async_trace.json:
plain data, no vLLM needed), and on that run broken one way at a time: each check stays
quiet on the first and fires on its own break.

The recorded run (8 blocks of 2, budget 4): r1 (prompt [1 2 1 2 1]) is prefilled 4 tokens
at step 1, then its last at step 2, where r2 (prompt [1 2 1 1]) arrives and starts at
position 2 on r1's first block. From step 2 on each step is scheduled before the previous
one's update: every decoding request has one token in flight after an update and two
after a schedule, and the v1 runner's copy holds -1 for each token it sampled, but reads
the last one from the device (step 4: r1's copy is [1 2 1 2 1 -1 2], computing position
6). r2 samples eos at step 4 and is scheduled once more at step 5 (its eos in flight),
then finishes at step 5's update; r1 runs to max_tokens 4.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.strategies import EARLY, observe
from schedcheck.engine.trace import UNKNOWN, EngineTrace, Pool
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.invariants.violation import Violation

TRACE = Path(__file__).resolve().parent.parent / "engine_subjects" / "vllm" / "async_trace.json"
CHECKS = active(on=VLLM.policies_on)


def recorded() -> EngineTrace:
    return EngineTrace.from_dict(json.loads(TRACE.read_text()))


def fired(trace: EngineTrace, check: str) -> list[Violation]:
    return [v for v in check_engine(trace, CHECKS) if v.check == check]


def with_progress(trace: EngineTrace, step: int, which: str, name: str, **new: int) -> EngineTrace:
    steps = list(trace.steps)
    pool: Pool = getattr(steps[step - 1], which)
    progress = tuple(p._replace(**new) if p.name == name else p for p in pool.progress)
    steps[step - 1] = replace(steps[step - 1], **{which: pool._replace(progress=progress)})
    return replace(trace, steps=tuple(steps))


def test_the_recorded_run_is_what_the_docstring_says_and_every_check_holds() -> None:
    trace = recorded()
    assert trace.workload.config.mode == "async-v1"
    assert check_engine(trace, CHECKS) == []
    fourth = trace.steps[3]
    assert fourth.copies[0].token_ids == (1, 2, 1, 2, 1, UNKNOWN, 2)
    assert (fourth.scheduled[0].num_cached, fourth.scheduled[0].num_scheduled) == (6, 1)
    assert fourth.after_schedule.progress == (("r1", 7, 2, 2), ("r2", 6, 2, 2))
    assert fourth.after_postprocess is not None
    assert fourth.after_postprocess.progress == (("r1", 7, 1, 1), ("r2", 6, 1, 1))
    fifth = trace.steps[4]
    assert fifth.scheduled[1].token_ids[-1] == 0  # r2's eos, in flight
    assert trace.outputs == {r.name: trace.workload.alone(r) for r in trace.workload.requests}


def test_e11_fires_on_a_negative_count_in_flight() -> None:
    broken = with_progress(recorded(), 3, "after_postprocess", "r1", placeholders=-1)
    (v,) = fired(broken, "E11")
    assert (v.step, v.call) == (3, "update_from_output()")
    assert "r1: num_output_placeholders is -1" in v.message


def test_e11_fires_on_num_computed_tokens_that_does_not_add_up() -> None:
    """After step 4's schedule r1 knows 6 tokens and has 2 in flight: 7 are computed."""
    broken = with_progress(recorded(), 4, "after_schedule", "r1", computed=8)
    (v,) = fired(broken, "E11")
    assert (v.step, v.call) == (4, "schedule()")
    assert "num_computed_tokens is 8, but it knows 6 tokens and has 2 in flight: 7" in v.message


def test_e11_fires_on_more_tokens_counted_in_flight_than_there_are() -> None:
    """After step 3's update r2 has one token in flight; a count of two is one that never
    lands (a placeholder left behind), running or preempted."""
    broken = with_progress(recorded(), 3, "after_postprocess", "r2", placeholders=2, computed=6)
    (v,) = fired(broken, "E11")
    assert (
        "r2: num_output_placeholders is 2, but it has 1 token(s) in flight (running)" in v.message
    )


def test_e11_is_quiet_on_a_preempted_request_whose_token_is_still_to_land() -> None:
    """0.2x count a preempted request's token in flight until it lands: no fault."""
    trace = recorded()
    pool = trace.steps[2].after_schedule
    steps = list(trace.steps)
    steps[2] = replace(
        steps[2], after_schedule=pool._replace(status={**pool.status, "r2": "WAITING"})
    )
    assert fired(replace(trace, steps=tuple(steps)), "E11") == []


def test_e12_fires_on_a_position_computed_on_a_placeholder() -> None:
    """Step 4 with r1's last input read from its CPU copy, not the device."""
    trace = recorded()
    steps = list(trace.steps)
    copies = list(steps[3].copies)
    copies[0] = copies[0]._replace(token_ids=(1, 2, 1, 2, 1, UNKNOWN, UNKNOWN))
    steps[3] = replace(steps[3], copies=tuple(copies))
    broken = replace(trace, steps=tuple(steps))
    (v,) = fired(broken, "E12")
    assert (v.step, v.call) == (4, "model runner")
    assert "r1 computes position(s) [6] on an unknown input" in v.message
    assert fired(broken, "E8") == []  # a placeholder is E12's to report, not E8's


def test_e13_is_quiet_on_a_request_whose_last_token_is_in_flight_and_fires_otherwise() -> None:
    """At step 6 r1 (max_tokens 4) knows 3 outputs and has its 4th in flight: vLLM does not
    schedule it again, and E13 agrees. Were max_tokens 5, the step would waste it."""
    trace = recorded()
    assert trace.steps[5].scheduled == () and trace.steps[5].schedules
    assert fired(trace, "E13") == []
    more = replace(trace.workload.requests[0], max_tokens=5)
    longer = replace(trace.workload, requests=(more, *trace.workload.requests[1:]))
    (v,) = fired(replace(trace, workload=longer), "E13")
    assert v.step == 6 and v.message.startswith("r1 running, left out of this step")
    assert v.message.endswith("0 of max_num_seqs 2 requests: nothing")


def test_reached_counts_an_early_batch_only_where_one_ran() -> None:
    """`reached:`'s device timing: a workload naming a step whose batch the device finished
    first counts where that step computed something."""
    trace = recorded()
    assert EARLY not in observe(trace)
    busy = next(s.step for s in trace.steps if s.scheduled)
    assert EARLY in observe(replace(trace, workload=replace(trace.workload, early=(busy,))))
    idle = len(trace.steps) + 5  # past the run's end: no batch there
    assert EARLY not in observe(replace(trace, workload=replace(trace.workload, early=(idle,))))
