"""The checks as they read vLLM's state (E2's promise of the prefix cache, E3's null block
and prefix-cache index, E10's preemption order), on a trace of vLLM 0.33.0's real scheduler
recorded here (tests/engine_subjects/vllm/trace.json, plain data: no vLLM needed to run these), and
on that trace broken one way at a time: each check stays quiet on the first and fires on
its own break.

The recorded run (fcfs, 5 blocks of 2, block 0 the null block): r1 and r2 (prompt [1])
start at step 1; at step 2 r3 (prompt [1 1 1 1 1]) finds r1's block 1, [1 1], in the prefix
cache and starts at position 2; at step 3 r3 is preempted from the tail of the running list
and goes back to the front of the waiting queue, before r4; at step 5, r3 finished, its
block 4 ([1 1 1 1]) waits in the free queue, still indexed by its hash.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from schedcheck.engine.checks import active, check_e13, check_engine
from schedcheck.engine.trace import Block, EngineStep, EngineTrace, Pool
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.invariants.violation import Violation

TRACE = Path(__file__).resolve().parent.parent / "engine_subjects" / "vllm" / "trace.json"
CHECKS = active(on=VLLM.policies_on)


def recorded() -> EngineTrace:
    return EngineTrace.from_dict(json.loads(TRACE.read_text()))


def fired(trace: EngineTrace) -> list[Violation]:
    return check_engine(trace, CHECKS)


def with_pool(trace: EngineTrace, step: int, which: str, pool: Pool) -> EngineTrace:
    steps = list(trace.steps)
    steps[step - 1] = replace(steps[step - 1], **{which: pool})
    return replace(trace, steps=tuple(steps))


def pool_of(trace: EngineTrace, step: int, which: str = "after_postprocess") -> Pool:
    s: EngineStep = trace.steps[step - 1]
    pool = getattr(s, which)
    assert isinstance(pool, Pool)
    return pool


def test_the_recorded_run_is_what_the_docstring_says_and_every_check_holds() -> None:
    trace = recorded()
    assert fired(trace) == []
    third = trace.steps[1].scheduled[2]
    assert (third.name, third.num_cached, third.block_table[0]) == ("r3", 2, 1)
    assert pool_of(trace, 3, "after_schedule").waiting == ("r3", "r4")
    assert pool_of(trace, 2, "after_schedule").running == ("r1", "r2", "r3")
    assert pool_of(trace, 5).blocks[4].token_ids == (1, 1, 1, 1)
    assert (pool_of(trace, 5).blocks[4].hash, 4) in pool_of(trace, 5).cache_index
    assert 4 in pool_of(trace, 5).free


def test_e10_fires_on_a_preempted_request_requeued_behind_another() -> None:
    trace = recorded()
    pool = pool_of(trace, 3, "after_schedule")
    broken = with_pool(trace, 3, "after_schedule", pool._replace(waiting=("r4", "r3")))
    (v,) = [v for v in fired(broken) if v.check == "E10"]
    assert v.step == 3 and "front of the waiting queue" in v.message


def test_e10_fires_on_the_wrong_victim_under_the_priority_policy() -> None:
    """Under priority, the victim is the running request of the largest (priority,
    arrival): with r2 given priority 2, r2 must go, not r3."""
    trace = recorded()
    w = trace.workload
    requests = tuple(replace(r, priority=2 if r.name == "r2" else 0) for r in w.requests)
    broken = replace(
        trace,
        workload=replace(w, config=replace(w.config, policy="priority"), requests=requests),
    )
    (v,) = [v for v in fired(broken) if v.check == "E10"]
    assert v.step == 3 and "preempted r3" in v.message and "are r2" in v.message
    # and r3 is the right victim when its priority is the largest
    fine = tuple(replace(r, priority=2 if r.name == "r3" else 0) for r in w.requests)
    right = replace(broken, workload=replace(broken.workload, requests=fine))
    assert [v for v in fired(right) if v.check == "E10"] == []


def test_e3_fires_on_the_null_block_handed_out() -> None:
    trace = recorded()
    pool = pool_of(trace, 2)
    broken = with_pool(trace, 2, "after_postprocess", pool._replace(free=(0, *pool.free)))
    (v,) = [v for v in fired(broken) if v.check == "E3"]
    assert "block 0 is reserved (vLLM's null block), but free" in v.message


def test_e3_fires_on_a_hashed_block_the_prefix_cache_does_not_index() -> None:
    trace = recorded()
    pool = pool_of(trace, 4)
    index = tuple(e for e in pool.cache_index if e[1] != 4)
    broken = with_pool(trace, 4, "after_postprocess", pool._replace(cache_index=index))
    (v,) = [v for v in fired(broken) if v.check == "E3"]
    assert v.step == 4 and "block 4 holds hash" in v.message and "does not index it" in v.message


def test_e3_fires_on_an_index_entry_for_a_block_without_that_hash() -> None:
    trace = recorded()
    pool = pool_of(trace, 4)
    index = tuple(sorted((*pool.cache_index, (pool.blocks[4].hash, 3))))
    broken = with_pool(trace, 4, "after_postprocess", pool._replace(cache_index=index))
    (v,) = [v for v in fired(broken) if v.check == "E3"]
    assert "the prefix cache finds block 3 under hash" in v.message


def test_e3_fires_on_a_held_block_whose_hash_names_another_prefix() -> None:
    trace = recorded()
    pool = pool_of(trace, 2)
    blocks = list(pool.blocks)
    blocks[1] = Block(blocks[1].ref_count, blocks[1].hash, (1, 2))
    broken = with_pool(trace, 2, "after_postprocess", pool._replace(blocks=tuple(blocks)))
    found = [v for v in fired(broken) if v.check == "E3"]
    assert found and "holds block 1 as its block 0" in found[0].message
    assert "names the prefix [1, 2]" in found[0].message


def test_e2_fires_on_a_cached_block_whose_kv_is_not_the_prefix_its_hash_names() -> None:
    """At step 5 block 4 is free and indexed, held by no one: a request with the prefix
    [1 1 1 2] would be handed it and read r3's KV of [1 1 1 1]."""
    trace = recorded()
    pool = pool_of(trace, 5)
    blocks = list(pool.blocks)
    blocks[4] = Block(0, blocks[4].hash, (1, 1, 1, 2))
    broken = with_pool(trace, 5, "after_postprocess", pool._replace(blocks=tuple(blocks)))
    (v,) = fired(broken)
    assert (v.check, v.step, v.call) == ("E2", 5, "update_from_output()")
    assert "block 4 is in the prefix cache" in v.message and "[1 1 1 2]" in v.message


def test_e13_fires_on_a_running_request_left_out_of_a_step_with_room() -> None:
    """At step 3 r3 is preempted; were it left running and unscheduled instead, the step
    would have run r2's one token of a budget of 3 without it."""
    trace = recorded()
    pool = pool_of(trace, 3, "after_schedule")
    broken = with_pool(
        trace, 3, "after_schedule", pool._replace(status={**pool.status, "r3": "RUNNING"})
    )
    (v,) = [v for v in fired(broken) if v.check == "E13"]
    assert v.step == 3 and v.seq_ids == ("r3",)
    assert "though it scheduled 1 of max_num_batched_tokens 3 and 1 of max_num_seqs 3" in v.message


def test_the_prefix_cache_index_is_read_in_each_releases_shape() -> None:
    """Its `_cache` maps a hash key to a block (0.11 to 0.2x), to a dict of the blocks cached
    under it (several, up to 0.33), or to a block id, the ids of a key cached by several
    blocks kept apart in `_dup_ids` (0.34)."""
    from types import SimpleNamespace

    from schedcheck.engine.vllm.drive import VllmDriver

    one, two = SimpleNamespace(block_id=1), SimpleNamespace(block_id=2)
    old = SimpleNamespace(_cache={"a": one, "b": {1: one, 2: two}})
    assert VllmDriver._index(old) == [("a", 1), ("b", 1), ("b", 2)]
    new = SimpleNamespace(_cache={"a": 1, "b": 1}, _dup_ids={"b": {1: None, 2: None}})
    assert VllmDriver._index(new) == [("a", 1), ("b", 1), ("b", 2)]


def test_e13_leaves_out_a_prefill_a_mamba_layer_s_aligned_split_cuts_to_nothing() -> None:
    """A model with a Mamba layer cuts a prefill chunk at a block boundary, its last
    excepted: a request whose share of the room would end short of its next boundary is
    left out by design (vLLM's `_mamba_block_aligned_split`). Only then: with the room to
    its prompt's end, or to a boundary, leaving it out is E13 still."""
    trace = recorded()
    pool = pool_of(trace, 3, "after_schedule")
    broken = with_pool(
        trace, 3, "after_schedule", pool._replace(status={**pool.status, "r3": "RUNNING"})
    )
    w = broken.workload
    # r3 (5 tokens, 3 computed) had 2 tokens of room: to its prompt's end
    mamba = replace(broken, workload=replace(w, layers=("mamba",)))
    assert [v.step for v in check_e13(mamba)] == [3]
    # r3 of 8 tokens, 4 computed, a budget of 2: its 1 token of room ends short of 6
    r3 = next(r for r in w.requests if r.name == "r3")
    longer = replace(
        w,
        config=replace(w.config, max_num_batched_tokens=2),
        requests=tuple(replace(r, prompt=(1,) * 8) if r is r3 else r for r in w.requests),
    )
    steps = list(broken.steps)
    second = steps[1]
    steps[1] = replace(
        second,
        scheduled=tuple(
            s._replace(num_scheduled=2) if s.name == "r3" else s for s in second.scheduled
        ),
    )
    cut = replace(broken, workload=longer, steps=tuple(steps))
    assert [v.step for v in check_e13(cut)] == [3]  # no Mamba layer: left out with room
    assert list(check_e13(replace(cut, workload=replace(longer, layers=("mamba",))))) == []
