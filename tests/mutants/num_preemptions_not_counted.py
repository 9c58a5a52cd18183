"""Bug: _preempt never increments num_preemptions.

Symptom: num_preemptions stays 0 though sequences are preempted. Caught by A1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _preempt(self, seq: Sequence) -> None:
        self.running.pop()
        self._free(seq)
        seq.num_computed = 0
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)
        # the bug: no self.num_preemptions += 1
