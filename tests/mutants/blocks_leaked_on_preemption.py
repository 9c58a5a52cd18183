"""Bug: preemption zeroes the victim's num_blocks but does not take them off blocks_used.

The student reset the sequence's fields by hand instead of calling _free. Symptom: every
preemption leaks the victim's blocks; blocks_used drifts above what running holds.
Caught by I1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _preempt(self, seq: Sequence) -> None:
        self.running.pop()
        seq.num_blocks = 0  # the bug: blocks_used still counts them
        seq.num_computed = 0
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)
        self.num_preemptions += 1
