"""Bug: phase 2 loops while budget >= 0, so a request can be admitted with n = 0.

Symptom: schedule() returns a 0 for a sequence; a wasted row. Caught by I2.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _may_admit(self, budget: int) -> bool:
        # the bug: >= 0 instead of > 0
        return bool(self.waiting) and budget >= 0 and len(self.running) < self.max_num_seqs
