"""Bug: phase 1 iterates `running` with a for loop over a copy (spec bug table, row 7).

Symptom: a preempted sequence is touched again and scheduled from waiting. Caught by I6.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _schedule_running(self, budget: int) -> int:
        for seq in list(self.running):  # the bug: preemption does not shorten this list
            if budget == 0:
                break
            n = min(seq.num_tokens - seq.num_computed, budget)
            while not self._try_grow(seq, seq.num_computed + n):
                victim = self.running[-1]
                self._preempt(victim)
                if victim is seq:
                    break
            else:
                self._scheduled[seq.seq_id] = n
                budget -= n
        return budget
