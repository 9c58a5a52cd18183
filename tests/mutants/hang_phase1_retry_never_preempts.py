"""Bug: phase 1's retry loop never preempts: it waits for blocks only a preemption frees.

`while not self._try_grow(...)` with the victim's preemption left out: once the pool is
full and a running sequence needs a new block, schedule() spins forever (issue 54's shape).
Caught by C1.
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
                pass  # the bug: the victim's preemption is missing
            self._scheduled[seq.seq_id] = n
            budget -= n
            i += 1
        return budget
