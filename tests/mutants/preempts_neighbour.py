"""Bug: phase 1 preempts the sequence right behind the one that needs a block, not running[-1].

The student read "the youngest" as "the next one in the list": `running[i + 1]`, or the
sequence itself when it is last. With at most two sequences running the two are always the
same sequence, so the bug needs three running at once. Symptom: a middle sequence loses its
KV while a younger one keeps it, and waiting falls out of arrival order. Caught by I5 or F1.
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
                # the bug: the neighbour behind, not the last
                victim = self.running[i + 1] if i + 1 < len(self.running) else seq
                self.running.remove(victim)
                self.running.append(victim)  # the reference's _preempt takes running[-1]
                self._preempt(victim)
                if victim is seq:
                    break
            else:
                self._scheduled[seq.seq_id] = n
                budget -= n
                i += 1
        return budget
