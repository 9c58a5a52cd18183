"""Forks without end in its first schedule(): every child forks again, for ever.

Expected: the box's process limit stops it; a failure for it alone, and the machine and
every classmate unharmed (docs/isolation.md).
"""

import os
import time

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def schedule(self) -> dict[str, int]:
        try:
            while True:
                if os.fork() == 0:
                    while True:
                        try:
                            os.fork()
                        except OSError:
                            time.sleep(1)
        except OSError as e:
            raise RuntimeError(f"the fork bomb was stopped: {e}") from None
