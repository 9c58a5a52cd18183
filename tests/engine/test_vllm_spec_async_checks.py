"""Speculative decoding where the worker keeps its drafts (issue 49): a run of vLLM 0.34.0's
real AsyncScheduler in mode async-v2, its default, with two drafts a step, recorded here
(tests/engine_subjects/vllm/spec_async_trace.json: plain data, no vLLM needed), and that
run broken one way at a time.

The workload is spec_trace.json's (10 blocks of 2, budget 6, drafts missing 4 in 8; r1
prompt [1 2 1], r2 [1 2] from step 2, both ignore_eos). The scheduler is sent -1 for every
draft (the v2 runner keeps its own, `req_states.draft_tokens`) and counts each step's drafts
among the positions in flight until the update verifies them (`num_output_placeholders`);
the runner starts each step at its own position, rejected drafts left out. At step 2 r1's
drafts are the runner's [1 2], both accepted; at step 3 its drafts [3 2] are both rejected,
and at step 4 (scheduled before step 3's update) the runner starts at position 7, two
before the scheduler's optimistic count. r2 is preempted at step 5 with drafts in flight.
Built with log_stats on, as its servers run it, the release's draft metrics of each update
are in the trace (E16).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.strategies import DRAFTS_ALL, DRAFTS_NONE, DRAFTS_PREEMPTED, observe
from schedcheck.engine.trace import UNKNOWN, DraftStats, EngineStep, EngineTrace
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.invariants.violation import Violation

TRACE = (
    Path(__file__).resolve().parent.parent / "engine_subjects" / "vllm" / "spec_async_trace.json"
)
CHECKS = active(on=VLLM.policies_on)


def recorded() -> EngineTrace:
    return EngineTrace.from_dict(json.loads(TRACE.read_text()))


def fired(trace: EngineTrace, check: str) -> list[Violation]:
    return [v for v in check_engine(trace, CHECKS) if v.check == check]


def at(trace: EngineTrace, step: int, change: object) -> EngineTrace:
    """The trace with step `step` replaced by change(step)."""
    return replace(
        trace,
        steps=tuple(change(s) if s.step == step else s for s in trace.steps),  # type: ignore[operator]
    )


def test_the_recorded_run_is_what_the_docstring_says_and_every_check_holds() -> None:
    trace = recorded()
    w = trace.workload
    assert (w.drafts, w.config.mode) == (2, "async-v2")
    assert check_engine(trace, CHECKS) == []
    assert trace.outputs == {r.name: w.alone(r) for r in w.requests}
    views = {s.step: {v.name: v for v in s.scheduled} for s in trace.steps}
    copies = {
        s.step: {v.name: c for v, c in zip(s.scheduled, s.copies, strict=True)} for s in trace.steps
    }
    two, copy = views[2]["r1"], copies[2]["r1"]
    assert two.draft_tokens == (UNKNOWN, UNKNOWN) and copy.token_ids[-2:] == (1, 2)
    assert copies[3]["r1"].token_ids[-2:] == (3, 2)
    assert w.verify(copies[3]["r1"].token_ids[:-2], (3, 2)) == (2,)  # both rejected
    four = views[4]["r1"]
    assert four.num_cached == copies[4]["r1"].num_cached == 7
    progress = {
        p.name: p for p in next(s for s in trace.steps if s.step == 4).after_schedule.progress
    }  # type: ignore[union-attr]
    assert progress["r1"].computed == 10  # the scheduler's count: the rejected two in it
    assert {DRAFTS_ALL, DRAFTS_NONE, DRAFTS_PREEMPTED} <= observe(trace)


def test_e2_reads_the_runner_s_own_drafts_where_the_scheduler_sent_placeholders() -> None:
    """Step 2 wrote r1's draft positions with the runner's drafts [1 2], which the model
    accepted: step 3 reads them as its own tokens. Written as what the scheduler sent (-1),
    they would be KV no position of r1 has; written as a draft the runner did not compute,
    E2 fires where step 3 reads it."""
    trace = recorded()
    assert fired(trace, "E2") == []

    def wrong_draft(step: EngineStep) -> EngineStep:
        copies = tuple(
            c._replace(token_ids=(*c.token_ids[:-1], 3)) if v.name == "r1" and c.token_ids else c
            for v, c in zip(step.scheduled, step.copies, strict=True)
        )
        return replace(step, copies=copies)

    found = fired(at(trace, 2, wrong_draft), "E2")
    assert found and found[0].step == 3 and "attends to position 5" in found[0].message


def test_e11_counts_drafts_in_flight_until_the_update_and_fires_on_them_counted_twice() -> None:
    """After step 4's schedule r1 has steps 3 and 4 in flight: step 3's one token and two
    drafts, step 4's one token; num_output_placeholders 4 is right. Counting step 3's
    drafts twice (6) is more than it has in flight."""
    trace = recorded()
    assert fired(trace, "E11") == []

    def twice(step: EngineStep) -> EngineStep:
        pool = step.after_schedule
        assert pool is not None
        progress = tuple(
            p._replace(placeholders=p.placeholders + 2) if p.name == "r1" else p
            for p in pool.progress
        )
        return replace(step, after_schedule=pool._replace(progress=progress))

    found = fired(at(trace, 4, twice), "E11")
    assert found and found[0].step == 4
    assert "num_output_placeholders is 6, but it has 4 token(s) in flight" in found[0].message


def test_e1_fires_on_a_step_that_starts_past_drafts_rejected_in_flight() -> None:
    """Step 4 is scheduled before step 3's update: the scheduler counts step 3's rejected
    drafts as computed, the runner does not. A step that started where the scheduler
    counts (position 9) would compute past r1's 8 tokens."""
    trace = recorded()

    def optimistic(step: EngineStep) -> EngineStep:
        views = tuple(v._replace(num_cached=9) if v.name == "r1" else v for v in step.scheduled)
        return replace(step, scheduled=views)

    found = fired(at(trace, 4, optimistic), "E1")
    assert found and found[0].step == 4 and "positions 9..9 of a sequence of 8" in found[0].message


def test_e16_reads_the_draft_metrics_and_fires_where_they_cannot_be() -> None:
    """The release's SpecDecodingStats of each update (log_stats on, as its servers run):
    step 4's update (of step 3) says 2 of 4 drafts accepted, one of each request's two
    positions. Metrics that say -1 accepted (the count a row that returned no token gave
    before `max(..., 0)`), more accepted than drafted, or a second draft accepted after a
    first rejected, fire."""
    trace = recorded()
    said = {s.step: s.draft_stats for s in trace.steps if s.draft_stats is not None}
    assert said[4] == DraftStats(4, 2, (2, 2), (1, 1)) and set(said) == {3, 4, 5, 6}
    assert fired(trace, "E16") == []

    def saying(stats: DraftStats) -> object:
        return lambda step: replace(step, draft_stats=stats)

    for wrong, problem in (
        (DraftStats(4, -1, (2, 2), (0, 0)), "a negative count"),
        (DraftStats(4, 5, (2, 2), (3, 2)), "more accepted than drafted"),
        (DraftStats(4, 1, (2, 2), (0, 1)), "a draft accepted after one rejected"),
        (DraftStats(4, 2, (2, 2), (1, 0)), "do not add up"),
    ):
        found = fired(at(trace, 4, saying(wrong)), "E16")
        assert [v.step for v in found] == [4] and problem in found[0].message, (wrong, found)
