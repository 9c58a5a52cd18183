"""Recompute preemption: the victim keeps its output (I4) and goes to the head of waiting (I5)."""

from __future__ import annotations

from collections.abc import Iterator

from schedcheck.invariants.evidence import Evidence
from schedcheck.invariants.violation import Violation


def check_i4(ev: Evidence) -> Iterator[Violation]:
    """I4: preemption resets only num_computed, num_blocks, status; output is kept."""
    for t in ev.transitions:
        for seq_id in t.preempted:
            was, now = t.before.seqs[seq_id].output, t.after.seqs[seq_id].output
            if now != was:
                yield Violation(
                    "I4",
                    t.step,
                    t.call,
                    f"{seq_id} was preempted and its output went from {list(was)} to "
                    f"{list(now)}; preemption loses the KV cache, never the generated tokens",
                    (seq_id,),
                )


def check_i5(ev: Evidence) -> Iterator[Violation]:
    """I5: a preempted sequence goes to the head of waiting; waiting is in arrival order."""
    for t in ev.transitions:
        waiting = t.after.waiting
        victims = [s for s in waiting if s in t.preempted]
        if list(waiting[: len(victims)]) != victims:
            tail = next(s for s in victims if s not in waiting[: len(victims)])
            yield Violation(
                "I5",
                t.step,
                t.call,
                f"{tail} was preempted but waiting is {list(waiting)}: a preempted sequence "
                "goes to the HEAD of waiting (it is older than everything there)",
                (tail,),
            )
            continue
        late = ev.out_of_order(waiting)
        if late is not None:
            yield Violation(
                "I5",
                t.step,
                t.call,
                f"waiting is {list(waiting)}, not in arrival order "
                f"{sorted(waiting, key=ev.arrival_rank.__getitem__)}: {late} is out of place",
                (late,),
            )
