"""Correct, but kills every process it may signal, once, in its first schedule().

Expected: with a uid of its own, it may signal no one but itself: it passes, and so does
every classmate graded at the same moment (docs/isolation.md).
"""

import contextlib
import os
import signal

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]

_fired = False


class Scheduler(_Reference):
    def schedule(self) -> dict[str, int]:
        global _fired
        if not _fired:
            _fired = True
            with contextlib.suppress(OSError):
                os.kill(-1, signal.SIGKILL)
        return super().schedule()
