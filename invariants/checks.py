"""Every check, run over one trace; the violations sorted so the first explains the most."""

from __future__ import annotations

from schedcheck.invariants.catalogue import CATALOGUE, CheckFunction, priority
from schedcheck.invariants.evidence import Evidence
from schedcheck.invariants.violation import Violation
from schedcheck.model.trace import Trace

# Each id's function, from the catalogue; a dict of its own, looked up at every call, so
# that a test can put a faulty check in place of one (tests/inject_fault.py).
CHECKS: dict[str, CheckFunction] = {check.id: check.function for check in CATALOGUE.values()}

_CALL_ORDER = {"Sequence()": 0, "Scheduler()": 0, "add()": 1, "schedule()": 2, "update()": 3}


def _order(v: Violation) -> tuple[int, int, int]:
    return (v.step, _CALL_ORDER.get(v.call, 4), priority(v.check))


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
