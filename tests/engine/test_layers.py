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

from schedcheck.engine.kv import check_e2
from schedcheck.engine.layers import Layer
from schedcheck.engine.trace import EngineStep, EngineTrace, Pool, Scheduled
from schedcheck.engine.traits import Runner, Traits
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload


def test_each_kind_reads_what_its_attention_reads() -> None:
    window, chunk = Layer.parse("window:3"), Layer.parse("chunk:4")
    assert str(window) == "window:3" and str(chunk) == "chunk:4"
    assert list(window.reads(0)) == [0] and list(window.reads(5)) == [3, 4, 5]
    assert list(chunk.reads(3)) == [0, 1, 2, 3] and list(chunk.reads(5)) == [4, 5]
    assert window.first_read(6) == 3 and chunk.first_read(6) == 4


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("mamba", "kind 'mamba' is not one of window, chunk"),
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
