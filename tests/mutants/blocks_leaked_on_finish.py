"""Bug: a finished sequence's KV blocks are never freed.

Symptom: blocks_used only grows; later requests cannot be admitted. Caught by I1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _finish(self, seq: Sequence) -> None:
        seq.status = SequenceStatus.FINISHED
        self.finished.append(seq)  # the bug: no self._free(seq)
