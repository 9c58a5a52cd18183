"""Eats memory: grows a list without end in schedule(). Expected: a memory failure."""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def schedule(self) -> dict[str, int]:
        hoard = []
        while True:
            hoard.append(bytearray(1 << 24))
