"""Bug: phase 2 never looks at max_num_seqs.

Symptom: more sequences run at once than there are slots. Caught by I8.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _may_admit(self, budget: int) -> bool:
        return bool(self.waiting) and budget > 0  # the bug: no len(running) < max_num_seqs
