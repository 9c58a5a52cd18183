"""Hangs: update() sleeps forever. Expected: a timeout failure."""

import time

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def update(self) -> list[Sequence]:
        time.sleep(10**6)
        return []
