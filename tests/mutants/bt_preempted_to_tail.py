"""Bug: a preempted sequence is put at the tail of waiting (spec bug table, row 4).

Symptom: it starves, or the order scrambles under pressure. Caught by I5, or by F1 when
the sequence behind it is admitted in the same step.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _preempt(self, seq: Sequence) -> None:
        super()._preempt(seq)
        self.waiting.remove(seq)
        self.waiting.append(seq)
