"""Leaves politely: sys.exit(0) in update(). Expected: a failure, never a pass."""

import sys

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def update(self) -> list[Sequence]:
        sys.exit(0)
