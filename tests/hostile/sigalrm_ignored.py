"""Hangs where an alarm cannot reach: SIGALRM ignored, then a busy loop. Expected: timeout."""

import signal

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]

signal.signal(signal.SIGALRM, signal.SIG_IGN)


class Scheduler(_Reference):
    def schedule(self) -> dict[str, int]:
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        n = 0
        while True:
            n += 1
