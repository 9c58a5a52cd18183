"""Bug: phase 2 admits while len(running) <= max_num_seqs.

Symptom: one sequence more runs than there are slots. Caught by I8.
"""

from scheduler import Scheduler as _Reference
from scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _schedule_waiting(self, budget: int) -> None:
        # the bug: <= lets one more in
        while self.waiting and budget > 0 and len(self.running) <= self.max_num_seqs:
            seq = self.waiting[0]
            n = min(seq.num_tokens - seq.num_computed, budget)
            if not self._try_grow(seq, seq.num_computed + n):
                break
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            self._scheduled[seq.seq_id] = n
            budget -= n
