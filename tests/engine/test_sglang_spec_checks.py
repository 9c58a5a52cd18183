"""SGLang's speculative decoding as the checks read it (issue 52), on a run of SGLang
0.5.23's real Scheduler with EAGLE, a chain of two drafts a step, its worker simulated
(schedcheck/engine/sglang/spec.py), recorded here (tests/engine_subjects/sglang/
spec_trace.json: plain data, no SGLang needed), and on that run broken one way at a time.

The recorded run (the normal loop: SGLang turns the overlap loop off for speculative
decoding on a CPU; 18 slots in pages of 2, page 0 its padding; max_running_requests 3,
chunked_prefill_size 12, schedule_conservativeness 0.3; no eos; drafts missing 3 in 8):
r1, r2, r3 (prompts [1 2 1 i], 8 tokens each) arrive at step 1. r1 is prefilled at step 1
and r2 at step 2 over r1's page [1 2]. At step 3 both verify: each request computes its
bonus (its last token, at position `seq_lens`) and two drafts in one step, 3 positions.
r1's proposer had one draft ([3], the chain padded with -1), which the model rejects; r2's
[2 2] are both accepted. The two decodes outgrow what admission reserved (SGLang reserves
twice a verify's width ahead for each decode): at step 4 r1, its drafts scheduled the step
before, is retracted to the waiting queue; r2 finishes at step 5, r3 runs from step 6 and
finishes at step 10; r1 is prefilled again at step 11 over the tree's copy of its prefix
and finishes at step 14. Every output equals its output alone, without drafts.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.command import unsupported
from schedcheck.engine.sglang.adapter import ADAPTER as SGLANG
from schedcheck.engine.strategies import (
    DRAFTS_ALL,
    DRAFTS_FEW,
    DRAFTS_NONE,
    DRAFTS_PREEMPTED,
    PREEMPTION,
    REPREFILL,
    observe,
)
from schedcheck.engine.trace import UNKNOWN, Block, EngineStep, EngineTrace
from schedcheck.engine.traits import Traits
from schedcheck.invariants.violation import Violation
from tests.engine.recorded_runs import at

TRACE = Path(__file__).resolve().parent.parent / "engine_subjects" / "sglang" / "spec_trace.json"
CHECKS = active(on=SGLANG.policies_on)


def recorded() -> EngineTrace:
    return EngineTrace.from_dict(json.loads(TRACE.read_text()))


def fired(trace: EngineTrace, check: str) -> list[Violation]:
    return [v for v in check_engine(trace, [*CHECKS, "E15"]) if v.check == check]


def changed(trace: EngineTrace, step: int, name: str, **fields: object) -> EngineTrace:
    """The trace with `name`'s view at step `step` changed."""

    def view(s: EngineStep) -> EngineStep:
        views = tuple(v._replace(**fields) if v.name == name else v for v in s.scheduled)
        return replace(s, scheduled=views)

    return at(trace, step, view)


def test_the_recorded_run_is_what_the_docstring_says_and_every_check_holds() -> None:
    trace = recorded()
    w = trace.workload
    assert (w.drafts, w.draft_miss_per_8, w.drafter, w.config.mode) == (2, 3, "hidden", "normal")
    assert not trace.traits.drafts_in_budget
    assert check_engine(trace, [*CHECKS, "E15"]) == []
    assert trace.outputs == {r.name: w.alone(r) for r in w.requests}
    by_step = {s.step: {v.name: v for v in s.scheduled} for s in trace.steps}
    r1, r2 = by_step[3]["r1"], by_step[3]["r2"]
    # a verify: the bonus at position seq_lens, then the drafts, one step
    assert (r1.num_cached, r1.num_scheduled, r1.drafts) == (4, 3, 2)
    assert len(r1.own) == r1.num_cached + 1 and r1.draft_tokens == (3, UNKNOWN)
    assert r1.proposed == (3,) and w.verify(r1.own, r1.proposed) == (2,)  # rejected
    assert w.verify(r2.own, r2.draft_tokens) == (2, 2, 2)  # both accepted, and its own
    assert by_step[4]["r2"].num_cached == r2.num_cached + 3
    assert trace.steps[3].after_schedule.status["r1"] == "WAITING"  # retracted at step 4
    assert {DRAFTS_ALL, DRAFTS_NONE, DRAFTS_FEW, DRAFTS_PREEMPTED, PREEMPTION, REPREFILL} <= (
        observe(trace)
    )


def test_the_tree_is_read_by_bigrams_and_names_verified_prefixes() -> None:
    """With EAGLE SGLang keys its radix tree by bigrams (a slot's token and the next): a
    page's prefix is read as the tokens of its positions, and every page the tree holds
    after r2 finished names a prefix of r2's (or r1's) tokens, verified ones."""
    trace = recorded()
    pool = trace.steps[4].after_postprocess
    assert pool is not None and pool.status["r2"] == "FINISHED"
    cached = [pool.blocks[b].token_ids for _, b in pool.cache_index]
    held = [pool.tokens[n] for n in ("r1", "r2")]
    assert cached and all(any(t[: len(p)] == p for t in held) for p in cached)
    assert max(map(len, cached)) >= 6  # r2's output is in the tree, not its prompt alone


def test_e4_counts_a_verify_as_its_one_token_where_the_engine_does() -> None:
    """SGLang's token budget bounds extends; a decode counts as one token whatever it
    verifies (Traits.drafts_in_budget False): two verifies of 3 positions under a budget of
    2 keep it, and break it where drafts count, or where the budget is 1."""
    trace = recorded()

    def budget(t: EngineTrace, tokens: int) -> EngineTrace:
        w = t.workload
        return replace(
            t, workload=replace(w, config=replace(w.config, max_num_batched_tokens=tokens))
        )

    two = budget(trace, 4)  # the prefills of step 1 and 11 compute 4
    assert [v for v in check_engine(two, ["E4"])] == []
    counted = replace(two, traits=Traits(**{**vars(two.traits), "drafts_in_budget": True}))
    found = check_engine(counted, ["E4"])
    assert found and found[0].step == 3 and "6 tokens scheduled, max" in found[0].message
    one = check_engine(budget(trace, 1), ["E4"])
    assert any(v.step == 3 and "2 tokens scheduled beside their drafts" in v.message for v in one)


def test_traits_round_trip_whether_drafts_count() -> None:
    traits = recorded().traits
    assert Traits.from_dict(json.loads(json.dumps(traits.to_dict()))) == traits
    data = traits.to_dict()
    del data["drafts_in_budget"]  # a trace saved before the field: vLLM's rule
    assert Traits.from_dict(data).drafts_in_budget


def test_e15_reads_drafts_padded_after_those_proposed() -> None:
    """r1's chain at step 3 is its one draft proposed, then -1: fresh. A draft after the
    padding, a wrong first draft, or padding where a draft was proposed are not."""
    trace = recorded()
    three = next(v for s in trace.steps if s.step == 3 for v in s.scheduled if v.name == "r1")
    own = three.own
    assert trace.workload.propose(own) == (3,) and fired(trace, "E15") == []
    for drafts in ((3, 3), (UNKNOWN, 3), (2, UNKNOWN)):
        found = fired(changed(trace, 3, "r1", token_ids=(*own, *drafts)), "E15")
        assert [(v.step, v.seq_ids) for v in found] == [(3, ("r1",))], drafts


def test_e2_fires_on_a_tree_page_over_a_rejected_draft_s_kv() -> None:
    """Step 3 wrote r1's position 5 for its draft 3, which the model rejected (it gives 2):
    a tree page naming r1's verified prefix over that slot before it is written again is
    unverified KV, and a request with that prefix would read it."""
    trace = recorded()
    three = next(v for s in trace.steps if s.step == 3 for v in s.scheduled if v.name == "r1")
    page = three.block_table[2]  # positions 4 and 5, pages of 2
    verified = (*three.own, *trace.workload.verify(three.own, three.proposed))
    prefix = verified[:6]
    pool = trace.steps[2].after_postprocess
    assert pool is not None and verified[5] != 3
    blocks = list(pool.blocks)
    blocks[page] = Block(blocks[page].ref_count, 123, prefix)
    broken = pool._replace(blocks=tuple(blocks), cache_index=(*pool.cache_index, (123, page)))
    steps = list(trace.steps)
    steps[2] = replace(steps[2], after_postprocess=broken)
    found = fired(replace(trace, steps=tuple(steps)), "E2")
    assert (
        found
        and found[0].step == 3
        and "a request with this prefix would read it" in (found[0].message)
    )


ABORTED = TRACE.with_name("abort_spec_trace.json")


def test_sglang_03_with_drafts_a_whole_run_is_sent_past_max_tokens() -> None:
    """SGLANG-03 (docs/findings.md) where the request drafts, recorded on 0.5.23: r1
    (prompt [1], 2 tokens, streamed) is prefilled at step 1 and sent its token; its abort
    is received at step 2, before that step's batch is formed. SGLang keeps it for one more
    decode, here a verify, and appends the whole accepted run (3 tokens) before it takes
    the abort as the finish; the length cap comes after that, so the client that cancelled
    is sent 4 tokens of a 2-token request. E21 fires, and E7 where E21 is off."""
    trace = EngineTrace.from_dict(json.loads(ABORTED.read_text()))
    (r1,) = trace.workload.requests
    assert (r1.max_tokens, r1.abort, r1.stream) == (2, 2, True)
    assert [s.streamed for s in trace.steps[:2]] == [(("r1", 1),), (("r1", 3),)]
    every = check_engine(trace, active(on=SGLANG.policies_on))
    assert [v.check for v in every] == ["E21", "E7"]
    assert "past the 2 tokens it may produce" in every[1].message


def test_a_saved_workload_with_drafts_in_the_overlap_loop_is_no_valid_input() -> None:
    """SGLang drafts in its normal loop alone on a CPU: a saved workload naming the overlap
    loop with drafts is refused, the field and value named (exit 2, not a traceback); one
    naming the normal loop, or none, runs."""
    w = recorded().workload
    loops = ("overlap", "normal")
    assert unsupported(w, SGLANG.features, loops) == []
    unnamed = replace(w, config=replace(w.config, mode=""))
    assert unsupported(unnamed, SGLANG.features, loops) == []
    overlap = replace(w, config=replace(w.config, mode="overlap"))
    assert unsupported(overlap, SGLANG.features, loops) == [
        "mode 'overlap' with drafts: this engine's speculative decoding runs in normal alone"
    ]
