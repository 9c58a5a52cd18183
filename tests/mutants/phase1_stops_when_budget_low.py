"""Bug: phase 1 stops at a running sequence whose remaining tokens exceed the budget left.

The student never chunks a running sequence. Symptom: a half-done prefill waits for a
step with budget enough for all of its rest, which may never come. Caught by R1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _schedule_running(self, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = seq.num_tokens - seq.num_computed
            if n > budget:
                break  # the bug: no min(..., budget), no chunk
            while not self._try_grow(seq, seq.num_computed + n):
                victim = self.running[-1]
                self._preempt(victim)
                if victim is seq:
                    break
            else:
                self._scheduled[seq.seq_id] = n
                budget -= n
                i += 1
        return budget
