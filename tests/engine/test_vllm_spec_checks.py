"""Speculative decoding (issue 49) as the core has it: the workload's proposer and greedy
verification, and the checks that know drafts, on a run of vLLM 0.34.0's real Scheduler in
mode sync-v2 with two drafts a step recorded here (tests/engine_subjects/vllm/
spec_trace.json: plain data, no vLLM needed), and on that run broken one way at a time.

The recorded run (10 blocks of 2, budget 6, drafts missing 4 in 8): r1 (prompt [1 2 1],
ignore_eos, 8 tokens) is prefilled at step 1; at step 2 it verifies the drafts [1 2], both
accepted, with eos as its own token; at step 3 its drafts [3 2] are both rejected (the
model gives 2 at position 7), and num_computed_tokens is rolled back: step 4 recomputes
position 7. r2 (prompt [1 2]) arrives at step 2, is preempted at step 5 with drafts
scheduled the step before, and comes back at step 6 padded to 1 + 2 rows, its drafts
vLLM's -1 placeholders. Every output equals its output alone.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from schedcheck.engine.adapter import Features
from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.strategies import (
    DRAFTS_ALL,
    DRAFTS_FEW,
    DRAFTS_NONE,
    DRAFTS_PREEMPTED,
    engine_workloads,
    observe,
)
from schedcheck.engine.trace import UNKNOWN, EngineStep, EngineTrace
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from schedcheck.invariants.violation import Violation

TRACE = Path(__file__).resolve().parent.parent / "engine_subjects" / "vllm" / "spec_trace.json"
CHECKS = active(on=VLLM.policies_on)


def recorded() -> EngineTrace:
    return EngineTrace.from_dict(json.loads(TRACE.read_text()))


def fired(trace: EngineTrace, check: str) -> list[Violation]:
    return [v for v in check_engine(trace, CHECKS) if v.check == check]


def changed(trace: EngineTrace, at: int, name: str, **fields: object) -> EngineTrace:
    """The trace with `name`'s view at step `at` changed."""

    def one(step: EngineStep) -> EngineStep:
        if step.step != at:
            return step
        views = tuple(s._replace(**fields) if s.name == name else s for s in step.scheduled)
        return replace(step, scheduled=views)

    return replace(trace, steps=tuple(one(s) for s in trace.steps))


def test_the_recorded_run_is_what_the_docstring_says_and_every_check_holds() -> None:
    trace = recorded()
    w = trace.workload
    assert (w.drafts, w.draft_miss_per_8) == (2, 4)
    assert check_engine(trace, CHECKS) == [] and "E15" in CHECKS
    assert trace.outputs == {r.name: w.alone(r) for r in w.requests}
    by_step = {s.step: {v.name: v for v in s.scheduled} for s in trace.steps}
    two, three, four = by_step[2]["r1"], by_step[3]["r1"], by_step[4]["r1"]
    assert two.token_ids[-2:] == (1, 2) and two.drafts == 2
    assert three.token_ids[-2:] == (3, 2) and w.verify(three.token_ids[:-2], (3, 2)) == (2,)
    assert four.num_cached == 7  # rolled back to the first rejected draft's position
    padded = by_step[6]["r2"]
    assert padded.token_ids[-2:] == (UNKNOWN, UNKNOWN) and padded.drafts == 2
    assert {DRAFTS_ALL, DRAFTS_NONE, DRAFTS_FEW, DRAFTS_PREEMPTED} <= observe(trace)


def test_e15_fires_on_stale_drafts_and_not_on_padding() -> None:
    trace = recorded()
    three = next(v for s in trace.steps if s.step == 3 for v in s.scheduled if v.name == "r1")
    stale = (*three.token_ids[:-2], 1, 1)  # drafts proposed for another sequence
    assert trace.workload.propose(three.token_ids[:-2])[:2] != (1, 1)
    found = fired(changed(trace, 3, "r1", token_ids=stale), "E15")
    assert [(v.step, v.seq_ids) for v in found] == [(3, ("r1",))]
    assert "stale drafts" in found[0].message
    assert fired(trace, "E15") == []  # step 6's -1 rows are padding, not drafts proposed


def test_e1_fires_on_a_draft_scheduled_and_not_computed() -> None:
    trace = recorded()
    broken = changed(trace, 3, "r1", num_scheduled=2)  # positions 6..7 of 9 with drafts
    found = fired(broken, "E1")
    assert found and found[0].step == 3 and "a draft scheduled is computed" in found[0].message


def test_e2_fires_where_a_rejected_draft_is_read_as_the_verified_token() -> None:
    """Step 3 wrote position 7's KV for the rejected draft 3; a step 4 that starts past it
    (no rollback) reads that KV as position 7 of r1's own prefix."""
    trace = recorded()
    broken = changed(trace, 4, "r1", num_cached=8, num_scheduled=1)
    found = fired(broken, "E2")
    assert found and found[0].step == 4 and "attends to position 7" in found[0].message


def test_e12_reads_no_draft_row_but_an_own_position_on_minus_one() -> None:
    trace = recorded()
    assert fired(trace, "E12") == []  # the padded rows hold -1: verified, not trusted

    def blind(step: EngineStep) -> EngineStep:
        if step.step != 4:
            return step
        copies = tuple(
            c._replace(token_ids=(*c.token_ids[:7], UNKNOWN, *c.token_ids[8:]))
            if c.token_ids is not None and len(c.token_ids) > 8
            else c
            for c in step.copies
        )
        return replace(step, copies=copies)

    found = fired(replace(trace, steps=tuple(blind(s) for s in trace.steps)), "E12")
    assert found and found[0].step == 4


TOKENS = st.lists(st.integers(0, 3), min_size=1, max_size=12).map(tuple)


@given(TOKENS, st.integers(1, 4), st.integers(0, 8))
def test_greedy_verification_gives_the_model_s_own_tokens(
    tokens: tuple[int, ...], drafts: int, miss: int
) -> None:
    """Whatever is proposed, what a step with drafts samples is the model's own chain: the
    drafts it agrees with, then its own token, one more than the drafts accepted."""
    w = EngineWorkload(EngineConfig(9, 2, 2, 4), (), 3, drafts=drafts, draft_miss_per_8=miss)
    proposed = w.propose(tokens)
    assert len(proposed) <= drafts
    got, chain = w.verify(tokens, proposed), list(tokens)
    assert 1 <= len(got) <= len(proposed) + 1
    for token in got:
        assert token == w.next_token(chain)
        chain.append(token)
    assert list(got[:-1]) == list(proposed[: len(got) - 1])  # the accepted drafts
    if miss == 0 and proposed:
        assert len(got) == len(proposed) + 1  # none missed: every draft accepted
    if miss == 8 and proposed:
        assert len(got) == 1  # every draft missed: none accepted


def test_a_workload_s_drafts_are_checked_and_round_trip() -> None:
    w = EngineWorkload(
        EngineConfig(3, 2, 1, 4), (EngineRequest("r1", (1, 2), 3),), 2, drafts=2, draft_miss_per_8=3
    )
    assert EngineWorkload.from_json(w.to_json()) == w
    assert any(
        "r1 with 2 draft tokens needs 3 KV blocks" in p
        for p in replace(w, config=replace(w.config, num_blocks=2)).problems()
    )
    assert any("drafts 9" in p for p in replace(w, drafts=9).problems())
    assert any("draft_miss_per_8 -1" in p for p in replace(w, draft_miss_per_8=-1).problems())


@given(engine_workloads(features=Features(drafts=4, draft_modes=("sync-v2",)), modes=("async-v2",)))
def test_a_workload_drawn_with_drafts_runs_in_a_draft_mode_with_room_for_them(
    w: EngineWorkload,
) -> None:
    assert w.problems() == []
    if w.drafts:
        assert 1 <= w.drafts <= 4 and w.config.mode == "sync-v2"
        assert w.config.max_num_batched_tokens >= 1 + w.drafts
    else:
        assert w.config.mode == "async-v2"
