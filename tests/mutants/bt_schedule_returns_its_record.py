"""Bug: schedule() returns its own record, not a copy (spec bug table, row 8).

Symptom: update() does not know what was scheduled once the caller consumed the dict.
Caught by A1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def schedule(self) -> dict[str, int]:
        super().schedule()
        return self._scheduled
