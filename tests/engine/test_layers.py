"""A hybrid model's layers (issue 51; engine/layers.py) and E2 per KV cache group
(engine/kv.py): what each kind of layer reads, the workload's `layers` as input, and E2
quiet on a run whose window group frees what it no longer reads and firing where a group's
read finds what it did not write (nothing, another group's KV, another request's).

The runs here are written by hand in vLLM's shape (its null block 0 where a window's
blocks were freed), one request of four prompt tokens decoding one more, blocks of 2 and a
window of 2; the recorded runs of vLLM come with its adapter."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings

from schedcheck.engine.adapter import Features
from schedcheck.engine.kv import check_e2
from schedcheck.engine.layers import Layer, state_index
from schedcheck.engine.strategies import engine_workloads
from schedcheck.engine.trace import Block, EngineStep, EngineTrace, Pool, Scheduled
from schedcheck.engine.traits import Runner, Traits
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload


def test_each_kind_reads_what_its_attention_reads() -> None:
    window, chunk = Layer.parse("window:3"), Layer.parse("chunk:4")
    assert str(window) == "window:3" and str(chunk) == "chunk:4"
    assert list(window.reads(0)) == [0] and list(window.reads(5)) == [3, 4, 5]
    assert list(chunk.reads(3)) == [0, 1, 2, 3] and list(chunk.reads(5)) == [4, 5]
    mamba = Layer.parse("mamba")
    assert str(mamba) == "mamba" and mamba.state and not window.state
    assert list(mamba.reads(5)) == []  # no KV per position: its state (state_index)
    # the state of the first k tokens sits in the block of position k - 1
    assert [state_index(k, 2) for k in (1, 2, 3, 4, 5)] == [0, 0, 1, 1, 2]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("linear", "kind 'linear' is not one of window, chunk, mamba"),
        ("mamba:2", "a mamba layer has no size"),
        ("window", "its size '' is not a whole number"),
        ("window:0", "its size '0' is not a whole number"),
        ("chunk:x", "its size 'x' is not a whole number"),
    ],
)
def test_a_layer_that_is_not_one_is_refused_by_name(text: str, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        Layer.parse(text)
    assert any(said in p for p in workload((text,)).problems())


def test_a_workload_names_each_kind_once_and_round_trips() -> None:
    assert workload(("window:2", "chunk:4")).problems() == []
    twice = workload(("window:2", "window:3")).problems()
    assert any("name a kind twice" in p for p in twice), twice
    w = workload(("window:2",))
    assert EngineWorkload.from_json(w.to_json()) == w
    assert (
        EngineWorkload.from_dict({k: v for k, v in w.to_dict().items() if k != "layers"}).layers
        == ()
    )


def test_a_hybrid_pool_holds_the_longest_request_in_every_group() -> None:
    small = workload(("window:2",))
    small = replace(small, config=replace(small.config, num_blocks=7))
    said = small.problems()
    assert any(
        "holds no request of max_model_len 6 in each of its 2 KV cache groups" in p for p in said
    )
    assert replace(small, layers=()).problems() == []


def workload(layers: tuple[str, ...]) -> EngineWorkload:
    config = EngineConfig(16, 2, 1, 4, "fcfs", "sync-v1")
    return EngineWorkload(config, (EngineRequest("r1", (1, 1, 1, 1), 2, True, 1),), layers=layers)


RUNNER = Runner(
    "vllm", "num_computed_tokens", "count", "num_scheduled_tokens", False, "mixed", "vLLM's"
)
TRAITS = Traits(RUNNER, hashes_name_prefixes=True, update_call="update_from_output()")
POOL = Pool((), (), (), {}, {}, {})


def run(second_group: tuple[int, ...], second_full: tuple[int, ...] = (1, 2, 5)) -> EngineTrace:
    """r1 [1 1 1 1] prefills positions 0..3 (full attention's blocks 1, 2; the window's 3,
    4), then decodes position 4 with the tables given (the window of 2 reads 3 and 4)."""
    tokens = (1, 1, 1, 1, 7)
    first = Scheduled("r1", 0, 4, tokens[:4], (1, 2), groups=((3, 4),))
    second = Scheduled("r1", 4, 1, tokens, second_full, groups=(second_group,))
    steps = (
        EngineStep(1, True, (first,), (), (7,), POOL, POOL),
        EngineStep(2, False, (second,), (), (9,), POOL, POOL),
    )
    return EngineTrace(workload(("window:2",)), TRAITS, steps)


def test_e2_is_quiet_where_the_window_s_freed_blocks_are_the_null_block() -> None:
    # block 3 (positions 0, 1) is out of the window at position 4: freed, null in its place
    assert list(check_e2(run((0, 4, 6)))) == []
    again = EngineTrace.from_dict(json.loads(json.dumps(run((0, 4, 6)).to_dict())))
    assert again == run((0, 4, 6)) and list(check_e2(again)) == []


def test_e2_fires_where_the_window_reads_a_block_freed_inside_it() -> None:
    found = list(check_e2(run((0, 0, 6))))  # block 4 (positions 2, 3) freed: 3 is read
    assert [v.check for v in found] == ["E2"], found
    assert "r1's window:2 layer attends to position 3 at slot 1" in found[0].message
    assert "group 1 block table [0, 0, 6]" in found[0].message


def test_e2_fires_where_a_group_reads_a_block_another_group_wrote() -> None:
    # full attention's block 2 (positions 2, 3) handed to the window as its own
    found = list(check_e2(run((0, 2, 6))))
    assert [v.check for v in found] == ["E2"], found
    assert "r1's window:2 layer attends to position 3 at slot 5" in found[0].message
    assert "holds position 3 of [1 1 1 1] (written for r1 at step 1)" in found[0].message


def test_e2_fires_where_full_attention_reads_a_block_a_window_wrote_over() -> None:
    # the window's position 4 written into block 5, where full attention wrote it too
    found = list(check_e2(run((0, 4, 5))))
    assert [v.check for v in found] == ["E2"], found
    assert "r1 attends to position 4 at slot 10" in found[0].message
    assert "written for r1's window:2 layer at step 2" in found[0].message
    # the window's block 4 (positions 2, 3) handed to full attention
    found = list(check_e2(run((0, 4, 6), (1, 4, 5))))
    assert found and "r1 attends to position 2 at slot 8" in found[0].message, found


def test_a_trace_without_groups_is_read_as_before() -> None:
    plain = replace(run((0, 4, 6)), workload=workload(()))
    steps = tuple(
        replace(s, scheduled=tuple(x._replace(groups=()) for x in s.scheduled)) for s in plain.steps
    )
    assert list(check_e2(replace(plain, steps=steps))) == []


def mamba_run(
    tables: tuple[tuple[int, ...], ...] = ((0, 3), (0, 3, 4), (0, 0, 4)),
    full_second: tuple[int, ...] = (1, 2, 5),
    cached: tuple[int, ...] = (1, 1, 1, 1),
) -> EngineTrace:
    """r1 [1 1 1 1 1] beside a Mamba layer (blocks of 2): step 1 computes positions 0..3
    and leaves the state of [1 1 1 1] at index 1 of its group's table (block 3); step 2
    computes position 4 from that state, leaving the state of all five at index 2 (block
    4); step 3 decodes position 5 from it, in place. After step 2 the prefix cache indexes
    block 3 as the prefix `cached`."""
    tokens = (1, 1, 1, 1, 1, 7)
    blocks = (*(Block(1, 0, ()) for _ in range(3)), Block(1, 7, cached))
    indexed = POOL._replace(blocks=blocks, cache_index=((7, 3),))
    first = Scheduled("r1", 0, 4, tokens[:5], (1, 2), groups=(tables[0],))
    second = Scheduled("r1", 4, 1, tokens[:5], full_second, groups=(tables[1],))
    third = Scheduled("r1", 5, 1, tokens, (1, 2, 5), groups=(tables[2],))
    steps = (
        EngineStep(1, True, (first,), (), (7,), POOL, POOL),
        EngineStep(2, True, (second,), (), (7,), POOL, indexed),
        EngineStep(3, False, (third,), (), (9,), POOL, POOL),
    )
    return EngineTrace(workload(("mamba",)), TRAITS, steps)


def test_e2_is_quiet_where_each_step_starts_from_the_state_its_prefix_left() -> None:
    assert list(check_e2(mamba_run())) == []
    again = EngineTrace.from_dict(json.loads(json.dumps(mamba_run().to_dict())))
    assert list(check_e2(again)) == []


def test_e2_fires_where_a_step_starts_from_a_state_freed_or_of_another_prefix() -> None:
    # the state of [1 1 1 1] freed before the step that reads it (the null block there)
    found = list(check_e2(mamba_run(((0, 3), (0, 0, 4), (0, 0, 4)))))
    assert [v.check for v in found] == ["E2"], found
    assert (
        "r1's mamba layer starts from the state of its first 4 tokens, at block 0 (index 1) "
        "of its group 1 block table [0, 0, 4], which holds nothing" in found[0].message
    )
    # step 2's table one block short (no block for the state of all five): step 3 reads
    # index 2, block 3, which still holds the state of the first four
    found = list(check_e2(mamba_run(((0, 3), (0, 3), (0, 0, 3)))))
    assert [v.check for v in found] == ["E2"] and found[0].step == 3, found
    assert (
        "first 5 tokens, at block 3 (index 2) of its group 1 block table [0, 0, 3], which "
        "holds the state of [1 1 1 1] (written for r1's mamba layer at step 1)"
    ) in found[0].message


def test_e2_fires_where_full_attention_and_the_mamba_layer_share_a_block() -> None:
    # step 2's full-attention table hands it block 4, the Mamba group's: the state written
    # there is what full attention then reads for position 4
    found = list(check_e2(mamba_run(full_second=(1, 2, 4))))
    assert found and found[0].check == "E2" and found[0].step == 2, found
    assert (
        "r1 attends to position 4 at slot 8, which holds the state of [1 1 1 1 1] (written "
        "for r1's mamba layer at step 2)"
    ) in found[0].message


def test_a_cached_state_block_holds_the_state_of_the_prefix_its_hash_names() -> None:
    assert list(check_e2(mamba_run(cached=(1, 1, 1, 1)))) == []
    found = list(check_e2(mamba_run(cached=(1, 1))))  # indexed as [1 1]: it holds [1 1 1 1]
    assert [v.check for v in found] == ["E2"], found
    assert "block 3 is in the prefix cache as hash #7, the prefix [1 1]" in found[0].message
    assert "holds the state of [1 1 1 1]" in found[0].message


def test_a_mamba_layer_with_drafts_is_refused_by_name() -> None:
    said = replace(workload(("mamba",)), drafts=2).problems()
    assert any("a Mamba layer's states under speculative decoding" in p for p in said), said


def test_a_mamba_workload_below_a_block_of_budget_is_refused_where_the_engine_asks_one() -> None:
    """Features.state_budget (vLLM 0.22 to 0.26): a model with a Mamba layer runs with a
    budget of a block at least; a replay below it names both fields, and the search never
    draws one."""
    small = replace(
        workload(("mamba",)), config=replace(workload(()).config, max_num_batched_tokens=1)
    )
    said = small.problems(state_budget=True)
    assert any("max_num_batched_tokens 1 is below kvcache_block_size 2" in p for p in said), said
    assert not any("kvcache_block_size" in p for p in small.problems())
    assert not any(
        "kvcache_block_size" in p for p in replace(small, layers=()).problems(state_budget=True)
    )
    features = replace(Features(), layers=("mamba",), state_budget=True)
    seen: list[EngineWorkload] = []

    @settings(max_examples=200, deadline=None, derandomize=True)
    @given(engine_workloads(features=features))
    def drawn(w: EngineWorkload) -> None:
        if w.layers:
            seen.append(w)

    drawn()
    assert seen and all(w.config.max_num_batched_tokens >= w.config.block_size for w in seen)
    assert all(w.problems(state_budget=True) == [] for w in seen)


def test_a_layer_is_never_drawn_with_a_drafter_the_engine_keeps_it_apart_from() -> None:
    """Features.apart (vLLM: chunked local attention with a drafter on the target's hidden
    states runs without the hybrid manager): no workload draws the pair; a Mamba layer is
    drawn with no drafts at all; the rest are drawn with drafts."""
    features = replace(
        Features(),
        layers=("window", "chunk", "mamba"),
        drafts=2,
        drafters=(("lookup", ()), ("hidden", ())),
        apart=(("chunk", "hidden"),),
    )
    seen: list[EngineWorkload] = []

    @settings(max_examples=400, deadline=None, derandomize=True)
    @given(engine_workloads(features=features))
    def drawn(w: EngineWorkload) -> None:
        if w.layers and w.drafts:
            seen.append(w)

    drawn()
    pairs = {(w.layers[0].partition(":")[0], w.drafter) for w in seen}
    assert ("chunk", "hidden") not in pairs and not any(k == "mamba" for k, _ in pairs)
    assert {("chunk", "lookup"), ("window", "hidden")} <= pairs, pairs
