"""Leaves abruptly: os._exit(0) in update(), no cleanup. Expected: a worker-death failure."""

import os

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def update(self) -> list[Sequence]:
        os._exit(0)
