"""Bug: phase 2 `continue`s past a request that does not fit instead of stopping.

The loop neither admits nor breaks: once waiting[0] cannot get its blocks while budget and
a slot are left, schedule() spins forever. Caught by C1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _schedule_waiting(self, budget: int) -> None:
        while self._may_admit(budget):
            seq = self.waiting[0]
            n = min(seq.num_tokens - seq.num_computed, budget)
            if not self._try_grow(seq, seq.num_computed + n):
                continue  # the bug: `break` (FCFS stops at the first that does not fit)
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            self._scheduled[seq.seq_id] = n
            budget -= n
