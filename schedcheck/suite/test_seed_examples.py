"""The spec's worked examples, every step asserted exactly, against the implementation under test.

Example 0 is in the original (Chinese) text only; examples 1-4 are in both. Where the
spec leaves a parameter open (max_num_seqs in example 2, max_tokens in examples 0 and 3,
num_blocks in example 0) the value chosen here cannot change the steps it states.

The implementation runs through the driver (isolated for a submission), with the spec's
model `100 * i + len(output)`; every value asserted is read from the trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from schedcheck.drive.impl import Implementation
from schedcheck.invariants.checks import CHECKS
from schedcheck.model.trace import Trace
from schedcheck.model.workload import Config, Request, Workload
from schedcheck.strategies.examples import EXAMPLES as SPEC_EXAMPLES
from schedcheck.strategies.examples import SPEC_MODEL
from schedcheck.suite.holds import assert_holds
from schedcheck.verdict.verify import verify


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

    def workload(self) -> Workload:
        requests = tuple(Request(*r) for r in self.requests)
        return Workload(Config(**self.config), requests, SPEC_MODEL)


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


def run_example(impl: Implementation, name: str) -> Trace:
    """Every check first (R1 holds a submission to the reference, step by step), so a
    failure reads as a full report; then the spec's table, value by value."""
    return assert_holds(impl, EXAMPLES[name].workload(), tuple(CHECKS))


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_worked_example(impl: Implementation, name: str) -> None:
    example = EXAMPLES[name]
    trace = run_example(impl, name)
    assert len(trace.steps) >= len(example.steps)
    for number, (step, got) in enumerate(zip(example.steps, trace.steps, strict=False), start=1):
        assert got.schedule == tuple(step.schedule.items()), f"step {number}"
        assert got.update is not None
        after = got.update.after
        assert got.update.finished == tuple(step.finished_now), f"step {number}"
        for seq_id, expected in step.seqs.items():
            s = after.seqs[seq_id]
            assert (s.num_computed, s.num_tokens, s.num_blocks) == expected, (
                f"step {number} {seq_id}"
            )
        for seq_id, output in step.outputs.items():
            assert after.seqs[seq_id].output == tuple(output), f"step {number} {seq_id}"
        assert after.blocks_used == step.blocks_used, f"step {number}"
        assert after.waiting == tuple(step.waiting), f"step {number}"
        assert after.num_preemptions == step.num_preemptions, f"step {number}"
        for state in (got.scheduled, after):  # the spec's own self-check (I1)
            assert state.blocks_used <= example.config["num_blocks"]
            assert state.blocks_used == sum(state.seqs[s].num_blocks for s in state.running)
    if len(example.finished) == len(example.requests):
        assert len(trace.steps) == len(example.steps)
        final = trace.final()
        assert final is not None and final.finished == tuple(example.finished)
        assert final.blocks_used == 0 and final.running == final.waiting == ()


def test_example3_a3_may_not_jump_the_queue(impl: Implementation) -> None:
    """Example 3 read right after schedule(): the state the spec's text describes."""
    first = run_example(impl, "example3-fcfs-head-of-line").steps[0]
    assert first.schedule == (("a1", 9),)
    assert first.scheduled.blocks_used == 3
    assert first.scheduled.waiting == ("a2", "a3")
    assert first.scheduled.running == ("a1",)


def test_example2_preemption_puts_victim_at_head_of_waiting(impl: Implementation) -> None:
    """Example 2, step 2 read right after schedule(): a2 preempted, a1 grown to 2 blocks."""
    second = run_example(impl, "example2-preempt-another").steps[1]
    assert second.schedule == (("a1", 1),)
    state = second.scheduled
    a2 = state.seqs["a2"]
    assert (a2.status, a2.num_computed, a2.num_blocks, a2.output) == ("WAITING", 0, 0, (200,))
    assert (state.seqs["a1"].num_blocks, state.blocks_used, state.num_preemptions) == (2, 2, 1)
    assert state.waiting == ("a2",)


def test_schedule_returns_a_copy(impl: Implementation) -> None:
    """update() must use its own record: the driver clears what schedule() returned, as an
    engine may, and update() must still apply the whole schedule (A1)."""
    verify(impl, EXAMPLES["example1-token-budget-chunked-prefill"].workload(), ("A1",)).require()


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_second_update_does_nothing(impl: Implementation, name: str) -> None:
    """A second update() with no schedule() returns [] and changes nothing (A1)."""
    workload = replace(EXAMPLES[name].workload(), reupdate=True)
    verdict = verify(impl, workload, ("C1", "A1"))
    verdict.require()
    assert all(step.again is not None for step in verdict.trace.steps)


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_the_tables_are_the_examples_the_graders_run(name: str) -> None:
    """strategies.examples (what `schedcheck grade` runs) holds exactly these workloads."""
    assert EXAMPLES[name].workload() in SPEC_EXAMPLES.values()
