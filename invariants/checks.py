"""Every check, run over one trace; the violations sorted so the first explains the most."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from schedcheck.invariants.budgets import check_i1, check_i2, check_i7, check_i8
from schedcheck.invariants.evidence import Evidence
from schedcheck.invariants.liveness import check_l1
from schedcheck.invariants.oracles import check_d1, check_r1
from schedcheck.invariants.preemption import check_i4, check_i5
from schedcheck.invariants.progress import check_a1, check_i3
from schedcheck.invariants.queues import check_f1, check_i6
from schedcheck.invariants.violation import PRIORITY, Violation
from schedcheck.model.trace import Trace

Check = Callable[[Evidence], Iterator[Violation]]


def check_c1(ev: Evidence) -> Iterator[Violation]:
    """C1: the driver could call every contract name and read back plain values."""
    failure = ev.trace.failure
    if failure is not None:
        yield Violation("C1", failure.step, failure.call, failure.message)


CHECKS: dict[str, Check] = {
    "C1": check_c1,
    "I1": check_i1,
    "I2": check_i2,
    "I3": check_i3,
    "I4": check_i4,
    "I5": check_i5,
    "I6": check_i6,
    "I7": check_i7,
    "I8": check_i8,
    "A1": check_a1,
    "F1": check_f1,
    "L1": check_l1,
    "D1": check_d1,
    "R1": check_r1,
}

_CALL_ORDER = {"Sequence()": 0, "Scheduler()": 0, "add()": 1, "schedule()": 2, "update()": 3}


def _order(v: Violation) -> tuple[int, int, int]:
    return (v.step, _CALL_ORDER.get(v.call, 4), PRIORITY.index(v.check))


def check_trace(
    trace: Trace,
    reference: Trace | None = None,
    unconstrained: Trace | None = None,
    only: tuple[str, ...] = tuple(CHECKS),
    since: int = 1,
) -> list[Violation]:
    """All violations of the checks in `only`, at most the first of each, earliest first.

    Only the first of each check is kept: later ones are usually its consequences. With
    `since`, only the calls of steps from `since` on are looked at, for a caller that
    checks a growing trace step by step.
    """
    ev = Evidence(trace, reference, unconstrained, since)
    firsts = (next(CHECKS[check](ev), None) for check in only)
    return sorted((v for v in firsts if v is not None), key=_order)
