"""C1: the submission contract (docs/contract.md), as the driver recorded it on the trace."""

from __future__ import annotations

from collections.abc import Iterator

from schedcheck.invariants.evidence import Evidence
from schedcheck.invariants.violation import Violation


def check_c1(ev: Evidence) -> Iterator[Violation]:
    """C1: the driver could call every contract name and read back plain values."""
    failure = ev.trace.failure
    if failure is not None:
        yield Violation("C1", failure.step, failure.call, failure.message)
