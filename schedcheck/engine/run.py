"""What every engine's run shares, whatever drives it: how a run stops, and the bound on
its steps (E5)."""

from __future__ import annotations

from schedcheck.engine.trace import EngineFailure
from schedcheck.engine.workload import EngineWorkload

__all__ = ["Stop", "bound"]


class Stop(Exception):
    """The run ends here, with `failure` (E5, E6, E8, or UNDRIVABLE: no verdict)."""

    def __init__(self, failure: EngineFailure) -> None:
        self.failure = failure


def bound(workload: EngineWorkload) -> int:
    """Steps within which every request must finish (E5): generous, since recompute
    preemption may redo a request's tokens once for every other request."""
    tokens = sum(len(r.prompt) + r.max_tokens for r in workload.requests)
    last = max((r.arrival for r in workload.requests), default=0)
    return last + tokens * (len(workload.requests) + 1) + 8
