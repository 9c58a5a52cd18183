"""Hangs: schedule() spins forever at step 2. Expected: a timeout failure."""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def schedule(self) -> dict[str, int]:
        if self.running:
            while True:
                pass
        return super().schedule()
