"""Bug: phase 2 admits while len(running) <= max_num_seqs.

Symptom: one sequence more runs than there are slots. Caught by I8.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _may_admit(self, budget: int) -> bool:
        # the bug: <= lets one more in
        return bool(self.waiting) and budget > 0 and len(self.running) <= self.max_num_seqs
