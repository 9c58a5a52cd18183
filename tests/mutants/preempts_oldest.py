"""Bug: phase 1 preempts running[0], the oldest, instead of running[-1].

The student gave the victim's tokens back to the budget and kept the index right, so
only the choice of victim is wrong. Symptom: the earliest request loses its KV first;
FCFS order is broken under pressure. Caught by F1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self._free(seq)
        seq.num_computed = 0
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)
        self.num_preemptions += 1

    def _schedule_running(self, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed, budget)
            while not self._try_grow(seq, seq.num_computed + n):
                victim = self.running[0]  # the bug: the oldest, not the latest admitted
                self._preempt(victim)
                if victim is seq:
                    break  # running[i] is now the next one
                # the victim was scheduled earlier this step: undo that, and step back
                budget += self._scheduled.pop(victim.seq_id)
                i -= 1
            else:
                self._scheduled[seq.seq_id] = n
                budget -= n
                i += 1
        return budget
