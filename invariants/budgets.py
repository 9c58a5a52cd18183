"""The three budgets: KV blocks (I1, I7) and the token budget (I2)."""

from __future__ import annotations

from collections.abc import Iterator

from schedcheck.invariants.evidence import FINISHED, RUNNING, WAITING, Evidence
from schedcheck.invariants.violation import Violation
from schedcheck.model.trace import State, show_schedule
from schedcheck.model.workload import blocks_for


def check_i1(ev: Evidence) -> Iterator[Violation]:
    """I1: blocks_used == sum(s.num_blocks for s in running) <= num_blocks; 0 once all finished."""
    num_blocks = ev.trace.workload.config.num_blocks
    for t in ev.transitions:
        state = t.after
        held = sum(state.seqs[s].num_blocks for s in state.running)
        if state.blocks_used != held:
            yield Violation(
                "I1",
                t.step,
                t.call,
                f"blocks_used is {state.blocks_used}, but the running sequences hold {held} "
                f"blocks between them ({_holdings(state)})",
                state.running,
            )
        elif state.blocks_used > num_blocks:
            yield Violation(
                "I1",
                t.step,
                t.call,
                f"blocks_used is {state.blocks_used}, more than num_blocks = {num_blocks}",
                state.running,
            )


def _holdings(state: State) -> str:
    return ", ".join(f"{s}: {state.seqs[s].num_blocks}" for s in state.running) or "none running"


def check_i2(ev: Evidence) -> Iterator[Violation]:
    """I2: sum(schedule().values()) <= max_num_batched_tokens, and every n >= 1."""
    budget = ev.trace.workload.config.max_num_batched_tokens
    for t in ev.transitions:
        if not t.is_schedule:
            continue
        zero = [s for s, n in t.schedule.items() if n < 1]
        if zero:
            yield Violation(
                "I2",
                t.step,
                t.call,
                f"schedule() gave {show_schedule(t.schedule)}: every n must be >= 1, "
                f"and {', '.join(zero)} got less",
                tuple(zero),
            )
        total = sum(t.schedule.values())
        if total > budget:
            yield Violation(
                "I2",
                t.step,
                t.call,
                f"schedule() gave {show_schedule(t.schedule)}, {total} tokens in all, over "
                f"max_num_batched_tokens = {budget}",
                tuple(t.schedule),
            )


def check_i8(ev: Evidence) -> Iterator[Violation]:
    """I8: len(running) <= max_num_seqs, the third budget (spec, "Three budgets").

    Phase 2 admits only while len(running) < max_num_seqs, and nothing else adds to
    running, so it holds after every call.
    """
    cap = ev.trace.workload.config.max_num_seqs
    for t in ev.transitions:
        if len(t.after.running) > cap:
            yield Violation(
                "I8",
                t.step,
                t.call,
                f"running holds {len(t.after.running)} sequences {list(t.after.running)}, "
                f"more than max_num_seqs = {cap}",
                t.after.running,
            )


def check_i7(ev: Evidence) -> Iterator[Violation]:
    """I7: KV covers exactly what is computed (spec, "Three budgets").

    A running sequence holds ceil(k / block_size) blocks, k = num_computed, plus n right
    after a schedule() that gave it n; a waiting one holds 0 blocks and has computed 0
    tokens (preemption frees both); a finished one holds 0 blocks.
    """
    block_size = ev.trace.workload.config.block_size
    for t in ev.transitions:
        scheduled = t.schedule if t.is_schedule else {}
        for seq_id, s in t.after.seqs.items():
            if s.status == RUNNING:
                k = s.num_computed + scheduled.get(seq_id, 0)
                need = blocks_for(k, block_size)
                if s.num_blocks == need:
                    continue
                tokens = f"num_computed {s.num_computed}" + (
                    f" + n {scheduled[seq_id]}" if seq_id in scheduled else ""
                )
                if s.num_blocks < need:
                    what = "too few: its KV would not fit"
                else:
                    what = "too many: blocks are counted on num_computed + n, not num_tokens"
                yield Violation(
                    "I7",
                    t.step,
                    t.call,
                    f"running {seq_id} holds {s.num_blocks} blocks for {tokens} = {k} tokens, "
                    f"which need ceil({k}/{block_size}) = {need}: {what}",
                    (seq_id,),
                )
            elif s.status == WAITING and (s.num_blocks or s.num_computed):
                yield Violation(
                    "I7",
                    t.step,
                    t.call,
                    f"waiting {seq_id} has num_computed {s.num_computed} and holds "
                    f"{s.num_blocks} blocks; a waiting sequence has no KV, so both must be 0 "
                    "(preemption resets them)",
                    (seq_id,),
                )
            elif s.status == FINISHED and s.num_blocks:
                yield Violation(
                    "I7",
                    t.step,
                    t.call,
                    f"finished {seq_id} still holds {s.num_blocks} blocks; finishing frees them",
                    (seq_id,),
                )
