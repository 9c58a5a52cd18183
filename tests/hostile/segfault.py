"""Dies by a signal: SIGSEGV, as a crash in native code would. Expected: a worker-death failure."""

import os
import signal

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def schedule(self) -> dict[str, int]:
        os.kill(os.getpid(), signal.SIGSEGV)
        return {}
