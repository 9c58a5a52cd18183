"""Floods stdout and stderr (megabytes per call), then breaks at step 2.

Expected: a failure whose report shows a few KB of the output, and none of it reaches the
checker's own output.
"""

import sys

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def schedule(self) -> dict[str, int]:
        for _ in range(2000):
            print("x" * 1000)
            print("y" * 1000, file=sys.stderr)
        if self.running:
            raise RuntimeError("flooded")
        return super().schedule()
