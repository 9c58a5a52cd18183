"""The simulated vLLM model runners (engine/vllm/runners.py) on SchedulerOutputs written by
hand: no vLLM needed. What each keeps of its own, as vLLM's runner does, read in its code."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from schedcheck.engine.trace import UNKNOWN, Copy
from schedcheck.engine.vllm.runners import V1Runner, V2Runner


def output(
    scheduled: dict[str, int],
    new: tuple[Any, ...] = (),
    cached: tuple[tuple[str, int, list[int] | None, bool], ...] = (),
    spec: dict[str, list[int]] | None = None,
    resumed_flags: bool = False,
) -> Any:
    """A SchedulerOutput: `cached` as (name, num_computed_tokens, new blocks, resumed); with
    `resumed_flags`, 0.11.0's shape (a flag per request, no all_token_ids or
    num_output_tokens)."""
    data = SimpleNamespace(
        req_ids=[c[0] for c in cached],
        num_computed_tokens=[c[1] for c in cached],
        new_block_ids=[None if c[2] is None else (c[2],) for c in cached],
    )
    if resumed_flags:
        data.resumed_from_preemption = [c[3] for c in cached]
    else:
        data.resumed_req_ids = {c[0] for c in cached if c[3]}
    return SimpleNamespace(
        finished_req_ids=set(),
        preempted_req_ids=set(),
        scheduled_new_reqs=list(new),
        scheduled_cached_reqs=data,
        num_scheduled_tokens=scheduled,
        scheduled_spec_decode_tokens=spec or {},
    )


def new_request(name: str, prompt: list[int], blocks: list[int]) -> Any:
    return SimpleNamespace(
        req_id=name,
        prompt_token_ids=prompt,
        prefill_token_ids=prompt,
        block_ids=(blocks,),
        num_computed_tokens=0,
    )


def test_v1_async_on_0_11_0_re_adds_a_resumed_request_from_its_own_copy() -> None:
    """0.11.0 sends a resumed request neither all_token_ids nor num_output_tokens: its v1
    runner re-adds it from its cached state, a -1 where it sampled a token on the device
    (VLLM-08). The simulated runner does the same, where it used to raise."""
    runner = V1Runner(overlapped=True)
    sampled = []

    def sample(name: str, copy: Copy, drafts: int) -> tuple[int, ...]:
        sampled.append(copy)
        return (9,)

    first = output({"r": 2}, new=(new_request("r", [1, 2], [0]),), resumed_flags=True)
    runner.execute(runner.receive(first), first, sample)
    assert runner.held("r") == (1, 2, UNKNOWN)  # async: the sample stays on the device
    runner.receive(output({}, resumed_flags=True))  # a step without r: it leaves the batch
    back = output({"r": 3}, cached=(("r", 0, [1], True),), resumed_flags=True)
    runner.execute(runner.receive(back), back, sample)
    assert sampled[-1].token_ids == (1, 2, UNKNOWN) and sampled[-1].num_cached == 0


def test_v2_computes_its_own_drafts_at_its_own_positions() -> None:
    """The v2 runner is sent -1 for each draft and an optimistic num_computed_tokens: it
    computes the drafts its proposer made, from where it counts (the rejected left out)."""
    runner = V2Runner(overlapped=True)
    seen: list[Copy] = []
    answers = iter([(3,), (6,), (7,)])  # the model: r's draft 4 rejected at the second step

    def sample(name: str, copy: Copy, drafts: int) -> tuple[int, ...]:
        seen.append(copy)
        return next(answers)

    first = output({"r": 2}, new=(new_request("r", [1, 2], [0, 1]),))
    runner.execute(runner.receive(first), first, sample)
    runner.propose("r", (4,), 1)
    assert runner.drafting() == {"r": 1}  # the width its handler tells the scheduler
    second = output({"r": 2}, cached=(("r", 99, None, False),), spec={"r": [UNKNOWN]})
    runner.execute(runner.receive(second), second, sample)
    assert seen[-1].token_ids == (1, 2, 3, 4) and seen[-1].num_cached == 2
    third = output({"r": 1}, cached=(("r", 99, None, False),))
    runner.execute(runner.receive(third), third, sample)
    assert seen[-1].num_cached == 3 and seen[-1].token_ids == (1, 2, 3, 6)
    assert runner.held("r") == (1, 2, 3, 6, 7)
    runner.propose("r", None, 0)  # a step whose schedule asked for no drafts
    assert runner.drafting() == {"r": 0}


def test_v1_async_with_drafts_corrects_the_previous_batch_s_rejections_only() -> None:
    """vLLM's v1 runner under async scheduling with drafts (0.11.1's `_update_states`,
    0.22.1's deferred `correct_spec_decode_token_counts`): it computes its own drafts (the
    scheduler's are -1s) and takes the previous batch's rejected drafts off the scheduler's
    optimistic num_computed_tokens, for a request of that batch only; its last own
    token's input is the device's sample."""
    runner = V1Runner(overlapped=True)
    assert runner.keeps_drafts and not V1Runner(overlapped=False).keeps_drafts
    seen: list[Copy] = []
    answers = iter([(3,), (5,), (6,), (7,)])  # the model: r's draft 4 rejected at step 2

    def sample(name: str, copy: Copy, drafts: int) -> tuple[int, ...]:
        seen.append(copy)
        return next(answers)

    first = output({"r": 2}, new=(new_request("r", [1, 2], [0, 1]),))
    runner.execute(runner.receive(first), first, sample)
    runner.propose("r", (4,), 1)
    # step 2: the scheduler counts 2 computed; one token (on the device) and the draft
    second = output({"r": 2}, cached=(("r", 2, None, False),), spec={"r": [UNKNOWN]})
    runner.execute(runner.receive(second), second, sample)
    assert seen[-1].token_ids == (1, 2, 3, 4) and seen[-1].num_cached == 2
    runner.propose("r", (6,), 1)
    # step 3: the scheduler counts the rejected draft as computed (4); the runner starts
    # at 3, where the model's own 5 is (from the device), and computes its draft 6 after
    # it; its CPU copy holds -1 for the token sampled on the device at step 1
    third = output({"r": 2}, cached=(("r", 4, None, False),), spec={"r": [UNKNOWN]})
    runner.execute(runner.receive(third), third, sample)
    assert seen[-1].num_cached == 3 and seen[-1].token_ids == (1, 2, UNKNOWN, 5, 6)
    # a step without r, then r again: its update has landed, the scheduler's count is right
    runner.receive(output({}))
    back = output({"r": 1}, cached=(("r", 5, None, False),))
    runner.execute(runner.receive(back), back, sample)
    assert seen[-1].num_cached == 5
