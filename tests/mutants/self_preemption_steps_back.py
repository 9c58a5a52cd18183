"""Bug: after a sequence preempts itself in phase 1, the index steps back one.

The student thought "running got shorter, so i -= 1"; but the victim was the last one, so
running[i] is already past the end. Symptom: the sequence before it is scheduled again in
the same step, its tokens charged twice to the budget. Caught by R1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _schedule_running(self, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed, budget)
            while not self._try_grow(seq, seq.num_computed + n):
                victim = self.running[-1]
                self._preempt(victim)
                if victim is seq:
                    i -= 1  # the bug: running got shorter, but i was already past it
                    break
            else:
                self._scheduled[seq.seq_id] = n
                budget -= n
                i += 1
        return budget
