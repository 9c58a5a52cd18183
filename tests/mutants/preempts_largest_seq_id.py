"""Bug: the preemption victim is the running sequence with the largest seq_id, taken for
the one that arrived last.

Symptom: with seq_ids in arrival order the largest is usually the tail of `running`; with
names that sort otherwise, an older sequence is preempted while a newer one keeps running
(and one scheduled earlier in the step may be preempted after it was scheduled).
Caught by F1, I5 or C1.
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
                victim = max(self.running, key=lambda s: s.seq_id)  # the bug: not running[-1]
                if self.running.index(victim) < i:
                    i -= 1
                self.running.remove(victim)
                self.running.append(victim)
                self._preempt(victim)  # pops running[-1], the victim
                if victim is seq:
                    break
            else:
                self._scheduled[seq.seq_id] = n
                budget -= n
                i += 1
        return budget
