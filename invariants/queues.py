"""Where each sequence is (I6) and in which order the queues hold them (F1)."""

from __future__ import annotations

from collections.abc import Iterator

from schedcheck.invariants.evidence import RUNNING, Evidence
from schedcheck.invariants.violation import Violation

QUEUES = (("waiting", "WAITING"), ("running", "RUNNING"), ("finished", "FINISHED"))


def check_i6(ev: Evidence) -> Iterator[Violation]:
    """I6: every sequence is in exactly one of waiting, running, finished, matching its status.

    And what schedule() returns is running: nothing finished or waiting is scheduled.
    """
    for t in ev.transitions:
        state = t.after
        place: dict[str, str] = {}
        for queue, _ in QUEUES:
            for seq_id in getattr(state, queue):
                if seq_id in place:
                    also = "twice" if place[seq_id] == queue else f"and in {place[seq_id]}"
                    yield Violation(
                        "I6", t.step, t.call, f"{seq_id} is in {queue} {also}", (seq_id,)
                    )
                place[seq_id] = queue
        for seq_id, s in state.seqs.items():
            where = place.get(seq_id)
            if where is None:
                yield Violation(
                    "I6",
                    t.step,
                    t.call,
                    f"{seq_id} ({s.status}) is in none of waiting, running, finished",
                    (seq_id,),
                )
            elif s.status != dict(QUEUES)[where]:
                yield Violation(
                    "I6",
                    t.step,
                    t.call,
                    f"{seq_id} is in {where} but its status is {s.status}",
                    (seq_id,),
                )
        if t.is_schedule:
            for seq_id in t.schedule:
                got = state.seqs.get(seq_id)
                if got is None or got.status != RUNNING:
                    what = "no added sequence" if got is None else f"{got.status}, not RUNNING"
                    yield Violation(
                        "I6",
                        t.step,
                        t.call,
                        f"schedule() scheduled {seq_id}, which is {what}: only running "
                        "sequences compute (a preempted one must not be touched again)",
                        (seq_id,),
                    )


def check_f1(ev: Evidence) -> Iterator[Violation]:
    """F1: running followed by waiting is always exactly in arrival order.

    Admission moves waiting[0] to the end of running, preemption moves running[-1] to the
    head of waiting, arrivals join the tail: only the boundary moves. Anything else (a skip
    in phase 2, a victim sent to the tail, the wrong victim) reorders the line.
    """
    for t in ev.transitions:
        line = t.after.running + t.after.waiting
        jumper = ev.out_of_order(line)
        if jumper is None:
            continue
        fair = sorted(line, key=ev.arrival_rank.__getitem__)
        yield Violation(
            "F1",
            t.step,
            t.call,
            f"running + waiting is {list(t.after.running)} + {list(t.after.waiting)}; in "
            f"arrival order it is {fair}: {jumper} is out of place (FCFS: nobody may jump "
            "the queue)",
            (jumper,),
        )
