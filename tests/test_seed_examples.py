"""The spec's worked examples, every step asserted exactly, against the implementation under test.

Example 0 is in the original (Chinese) text only; examples 1-4 are in both. Where the
spec leaves a parameter open (max_num_seqs in example 2, max_tokens in examples 0 and 3,
num_blocks in example 0) the value chosen here cannot change the steps it states.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest

from tests.helpers import create_requests, create_scheduler, ids


@dataclass(frozen=True)
class Step:
    """One row of a spec table: what schedule() returns, then the state after update()."""

    schedule: dict[str, int]
    seqs: dict[str, tuple[int, int, int]]  # num_computed / num_tokens / num_blocks
    outputs: dict[str, list[int]]
    blocks_used: int
    waiting: list[str] = field(default_factory=list)
    finished_now: list[str] = field(default_factory=list)
    num_preemptions: int = 0


@dataclass(frozen=True)
class Example:
    config: dict[str, int]
    requests: tuple[tuple[str, int, int], ...]  # seq_id, prompt_len, max_tokens
    steps: tuple[Step, ...]
    finished: list[str]


EXAMPLES = {
    "example0-original-budget16": Example(
        config=dict(num_blocks=100, block_size=4, max_num_seqs=8, max_num_batched_tokens=16),
        requests=(("s0", 10, 3), ("s1", 10, 3), ("s2", 10, 3)),
        steps=(
            Step(
                {"s0": 10, "s1": 6},
                {"s0": (10, 11, 3), "s1": (6, 10, 2), "s2": (0, 10, 0)},
                {"s0": [0], "s1": [], "s2": []},
                blocks_used=5,
                waiting=["s2"],
            ),
            Step(
                {"s0": 1, "s1": 4, "s2": 10},
                {"s0": (11, 12, 3), "s1": (10, 11, 3), "s2": (10, 11, 3)},
                {"s0": [0, 1], "s1": [100], "s2": [200]},
                blocks_used=9,
            ),
            Step(
                {"s0": 1, "s1": 1, "s2": 1},
                {"s0": (12, 13, 0), "s1": (11, 12, 3), "s2": (11, 12, 3)},
                {"s0": [0, 1, 2], "s1": [100, 101], "s2": [200, 201]},
                blocks_used=6,
                finished_now=["s0"],
            ),
        ),
        finished=["s0"],
    ),
    "example1-token-budget-chunked-prefill": Example(
        config=dict(num_blocks=100, block_size=4, max_num_seqs=8, max_num_batched_tokens=8),
        requests=(("a1", 6, 3), ("a2", 5, 2), ("a3", 3, 1)),
        steps=(
            Step(
                {"a1": 6, "a2": 2},
                {"a1": (6, 7, 2), "a2": (2, 5, 1), "a3": (0, 3, 0)},
                {"a1": [100], "a2": [], "a3": []},
                blocks_used=3,
                waiting=["a3"],
            ),
            Step(
                {"a1": 1, "a2": 3, "a3": 3},
                {"a1": (7, 8, 2), "a2": (5, 6, 2), "a3": (3, 4, 0)},
                {"a1": [100, 101], "a2": [200], "a3": [300]},
                blocks_used=4,
                finished_now=["a3"],
            ),
            Step(
                {"a1": 1, "a2": 1},
                {"a1": (8, 9, 0), "a2": (6, 7, 0)},
                {"a1": [100, 101, 102], "a2": [200, 201]},
                blocks_used=0,
                finished_now=["a1", "a2"],
            ),
        ),
        finished=["a3", "a1", "a2"],
    ),
    "example2-preempt-another": Example(
        config=dict(num_blocks=3, block_size=2, max_num_seqs=8, max_num_batched_tokens=64),
        requests=(("a1", 2, 3), ("a2", 3, 2)),
        steps=(
            Step(
                {"a1": 2, "a2": 3},
                {"a1": (2, 3, 1), "a2": (3, 4, 2)},
                {"a1": [100], "a2": [200]},
                blocks_used=3,
            ),
            Step(
                {"a1": 1},
                {"a1": (3, 4, 2), "a2": (0, 4, 0)},
                {"a1": [100, 101], "a2": [200]},
                blocks_used=2,
                waiting=["a2"],
                num_preemptions=1,
            ),
            Step(
                {"a1": 1},
                {"a1": (4, 5, 0), "a2": (0, 4, 0)},
                {"a1": [100, 101, 102], "a2": [200]},
                blocks_used=0,
                waiting=["a2"],
                finished_now=["a1"],
                num_preemptions=1,
            ),
            Step(
                {"a2": 4},
                {"a2": (4, 5, 0)},
                {"a2": [200, 201]},
                blocks_used=0,
                finished_now=["a2"],
                num_preemptions=1,
            ),
        ),
        finished=["a1", "a2"],
    ),
    "example3-fcfs-head-of-line": Example(
        config=dict(num_blocks=5, block_size=4, max_num_seqs=8, max_num_batched_tokens=100),
        requests=(("a1", 9, 4), ("a2", 9, 4), ("a3", 1, 4)),
        steps=(
            Step(
                {"a1": 9},
                {"a1": (9, 10, 3), "a2": (0, 9, 0), "a3": (0, 1, 0)},
                {"a1": [100], "a2": [], "a3": []},
                blocks_used=3,
                waiting=["a2", "a3"],
            ),
        ),
        finished=[],
    ),
    "example4-self-preemption": Example(
        config=dict(num_blocks=3, block_size=2, max_num_seqs=8, max_num_batched_tokens=64),
        requests=(("a1", 2, 3), ("a2", 2, 3)),
        steps=(
            Step(
                {"a1": 2, "a2": 2},
                {"a1": (2, 3, 1), "a2": (2, 3, 1)},
                {"a1": [100], "a2": [200]},
                blocks_used=2,
            ),
            Step(
                {"a1": 1},
                {"a1": (3, 4, 2), "a2": (0, 3, 0)},
                {"a1": [100, 101], "a2": [200]},
                blocks_used=2,
                waiting=["a2"],
                num_preemptions=1,
            ),
            Step(
                {"a1": 1},
                {"a1": (4, 5, 0), "a2": (0, 3, 0)},
                {"a1": [100, 101, 102], "a2": [200]},
                blocks_used=0,
                waiting=["a2"],
                finished_now=["a1"],
                num_preemptions=1,
            ),
            Step(
                {"a2": 3}, {"a2": (3, 4, 2)}, {"a2": [200, 201]}, blocks_used=2, num_preemptions=1
            ),
            Step(
                {"a2": 1},
                {"a2": (4, 5, 0)},
                {"a2": [200, 201, 202]},
                blocks_used=0,
                finished_now=["a2"],
                num_preemptions=1,
            ),
        ),
        finished=["a1", "a2"],
    ),
}


def assert_blocks_consistent(sched: Any) -> None:
    """The spec's own self-check after every step (I1)."""
    assert sched.blocks_used <= sched.num_blocks
    assert sched.blocks_used == sum(seq.num_blocks for seq in sched.running)


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_worked_example(impl: ModuleType, name: str) -> None:
    example = EXAMPLES[name]
    sched = create_scheduler(impl, **example.config)
    seqs = create_requests(impl, sched, *example.requests)
    for number, step in enumerate(example.steps, start=1):
        scheduled = sched.schedule()
        assert list(scheduled.items()) == list(step.schedule.items()), f"step {number}"
        assert_blocks_consistent(sched)
        done = sched.update()
        assert ids(done) == step.finished_now, f"step {number}"
        for seq_id, expected in step.seqs.items():
            seq = seqs[seq_id]
            got = (seq.num_computed, seq.num_tokens, seq.num_blocks)
            assert got == expected, f"step {number} {seq_id}"
        for seq_id, output in step.outputs.items():
            assert seqs[seq_id].output == output, f"step {number} {seq_id}"
        assert sched.blocks_used == step.blocks_used, f"step {number}"
        assert ids(sched.waiting) == step.waiting, f"step {number}"
        assert sched.num_preemptions == step.num_preemptions, f"step {number}"
        assert_blocks_consistent(sched)
    assert ids(sched.finished) == example.finished
    if len(example.finished) == len(example.requests):
        assert sched.blocks_used == 0
        assert sched.running == [] and len(sched.waiting) == 0


def test_example3_a3_may_not_jump_the_queue(impl: ModuleType) -> None:
    """Example 3 read right after schedule(): the state the spec's text describes."""
    sched = create_scheduler(impl, num_blocks=5, block_size=4, max_num_batched_tokens=100)
    create_requests(impl, sched, ("a1", 9, 4), ("a2", 9, 4), ("a3", 1, 4))
    assert sched.schedule() == {"a1": 9}
    assert sched.blocks_used == 3
    assert ids(sched.waiting) == ["a2", "a3"]
    assert ids(sched.running) == ["a1"]


def test_example2_preemption_puts_victim_at_head_of_waiting(impl: ModuleType) -> None:
    """Example 2, step 2 read right after schedule(): a2 preempted, a1 grown to 2 blocks."""
    sched = create_scheduler(impl, num_blocks=3, block_size=2)
    seqs = create_requests(impl, sched, ("a1", 2, 3), ("a2", 3, 2))
    sched.schedule()
    sched.update()
    assert sched.schedule() == {"a1": 1}
    a2 = seqs["a2"]
    assert (a2.status.name, a2.num_computed, a2.num_blocks, a2.output) == ("WAITING", 0, 0, [200])
    assert (seqs["a1"].num_blocks, sched.blocks_used, sched.num_preemptions) == (2, 2, 1)
    assert ids(sched.waiting) == ["a2"]


def test_schedule_returns_a_copy(impl: ModuleType) -> None:
    """update() must use its own record: an engine may mutate what schedule() returned."""
    sched = create_scheduler(impl)
    seqs = create_requests(impl, sched, ("a1", 3, 2))
    scheduled = sched.schedule()
    scheduled.clear()
    sched.update()
    assert seqs["a1"].num_computed == 3 and seqs["a1"].output == [100]


def test_second_update_does_nothing(impl: ModuleType) -> None:
    sched = create_scheduler(impl)
    seqs = create_requests(impl, sched, ("a1", 3, 1))
    assert sched.update() == []
    sched.schedule()
    assert ids(sched.update()) == ["a1"]
    assert sched.update() == []
    assert seqs["a1"].output == [100] and ids(sched.finished) == ["a1"]
