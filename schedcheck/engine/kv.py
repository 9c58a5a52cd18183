"""E2, the simulated KV cache: each slot holds the KV of one (position, whole prefix).

A step first writes the KV of every position it computes into the slot its sequence's
block table names (`block_table[p // block_size] * block_size + p % block_size`; a decode
writes into the table's last block where the runner does so, as nano-vllm's does), then
every scheduled sequence attends to positions 0 .. end-1 through its block table: each
read must find exactly what that position of that sequence's own prefix wrote. Reading
another sequence's KV, or a block's stale KV after it was reused, is the silent bug: the
model computes on the wrong context and nothing crashes.

Where a block's hash names a prefix (vLLM's prefix cache), the KV is checked where it is
promised too: after every step's update, each block the prefix cache indexes holds, in
every slot, the KV of that prefix's position, since any later request with that prefix
may be handed the block and read it without computing it.

A draft position holds the draft the runner computed there: the scheduler's own where it
sent the drafts, the runner's where the scheduler sent placeholders for drafts the worker
keeps (vLLM's v2 runner): those are what the step wrote, and what it attends to.
"""

from __future__ import annotations

from collections.abc import Iterator

from schedcheck.engine.trace import EngineTrace, Pool, Scheduled, computed_on
from schedcheck.engine.traits import Traits
from schedcheck.invariants.violation import Violation

__all__ = ["Written", "check_e2", "held", "holds", "show", "span"]

Written = tuple[int, tuple[int, ...], str, int]  # position, prefix, by whom, at which step


def check_e2(trace: EngineTrace) -> Iterator[Violation]:
    slots: dict[int, Written] = {}
    bs = trace.workload.config.block_size
    runner = trace.traits.runner
    for step in trace.steps:
        # nano-vllm's decode writes into the table's last block, whatever p says
        last = runner.decode == "last-block" and not step.is_prefill
        copies = (*step.copies, *[None] * len(step.scheduled))  # a failed step has fewer
        computed = [computed_on(seq, copies[i]) for i, seq in enumerate(step.scheduled)]
        for seq, tokens in zip(step.scheduled, computed, strict=True):
            start, end = span(seq)
            for p in range(start, min(end, len(tokens))):
                slot = _last_slot(seq, p, bs) if last else _slot(seq, p, bs)
                if slot is not None:
                    slots[slot] = (p, tokens[: p + 1], seq.name, step.step)
        for seq, tokens in zip(step.scheduled, computed, strict=True):
            _, end = span(seq)
            for q in range(min(end, len(tokens))):
                slot = _slot(seq, q, bs)
                want = tokens[: q + 1]
                found = slots.get(slot) if slot is not None else None
                if holds(found, q, want):
                    continue
                where = "outside its block table" if slot is None else f"slot {slot}"
                yield Violation(
                    "E2",
                    step.step,
                    "model runner",
                    f"{seq.name} attends to position {q} at {where}, which holds {held(found)}, "
                    f"not position {q} of its own {show(want)}",
                    (seq.name,),
                )
                break  # one per sequence per step: the first wrong read tells the story
        if trace.traits.hashes_name_prefixes and step.after_postprocess is not None:
            yield from _promised(step.after_postprocess, slots, bs, step.step, trace.traits)


def _promised(
    pool: Pool, slots: dict[int, Written], bs: int, step: int, traits: Traits
) -> Iterator[Violation]:
    """Each indexed block holds the KV of the prefix its hash names."""
    for number, b in pool.cache_index:
        prefix = pool.blocks[b].token_ids if 0 <= b < len(pool.blocks) else ()
        first = len(prefix) - bs
        for j in range(bs if first >= 0 else 0):
            p = first + j
            found = slots.get(b * bs + j)
            if holds(found, p, prefix[: p + 1]):
                continue
            yield Violation(
                "E2",
                step,
                traits.update_call,
                f"block {b} is in the prefix cache as hash #{number}, the prefix "
                f"{show(prefix)}, but its slot {b * bs + j} holds {held(found)}, not "
                f"position {p} "
                "of that prefix: a request with this prefix would read it",
                (),
            )
            return  # the first broken promise tells the story


def holds(found: Written | None, position: int, prefix: tuple[int, ...]) -> bool:
    """Whether a slot holds the KV of `position` of `prefix`."""
    return found is not None and found[0] == position and found[1] == prefix


def held(found: Written | None) -> str:
    """What a slot holds, in words."""
    if found is None:
        return "nothing"
    return f"position {found[0]} of {show(found[1])} (written for {found[2]} at step {found[3]})"


def span(seq: Scheduled) -> tuple[int, int]:
    """The positions this step computes for `seq`: [num_cached, num_cached + n)."""
    return seq.num_cached, seq.num_cached + seq.num_scheduled


def _slot(seq: Scheduled, p: int, block_size: int) -> int | None:
    index = p // block_size
    if not 0 <= index < len(seq.block_table):
        return None
    return seq.block_table[index] * block_size + p % block_size


def _last_slot(seq: Scheduled, p: int, block_size: int) -> int | None:
    if not seq.block_table:
        return None
    return seq.block_table[-1] * block_size + p % block_size


def show(tokens: tuple[int, ...]) -> str:
    return "[" + " ".join(map(str, tokens)) + "]"
