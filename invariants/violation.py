"""What a check says when it fires. What each check means is in the catalogue
(invariants/catalogue.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Typed here for the modules that still import them from this one (grading/gradescope.py).
    from schedcheck.invariants.catalogue import CATALOGUE as CATALOGUE
    from schedcheck.invariants.catalogue import PRIORITY as PRIORITY


@dataclass(frozen=True)
class Violation:
    """One broken rule, at one call of one step, in plain words."""

    check: str  # an id of the catalogue: C1, I1-I8, A1, F1, L1, D1, R1 (or an engine's E1-E9)
    step: int  # from 1; 0 = before the first step (constructing the scheduler)
    call: str  # "schedule()", "update()", "update() again", "end of run", ...
    message: str
    seq_ids: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f"step {self.step}, {self.call}" if self.step else self.call
        return f"{self.check} at {where}: {self.message}"


def __getattr__(name: str) -> object:
    """CATALOGUE and PRIORITY, which moved to the catalogue, looked up when first asked
    for (PEP 562): the catalogue imports every check, and every check imports this module,
    so importing them here at the top would be a cycle."""
    if name in ("CATALOGUE", "PRIORITY"):
        from schedcheck.invariants import catalogue

        return getattr(catalogue, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
