"""Bug: phase 2 uses `continue` to skip a request that does not fit (spec bug table, row 6).

Symptom: FCFS broken; in example 3, a3 is scheduled ahead of a2. Caught by F1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _schedule_waiting(self, budget: int) -> None:
        for seq in list(self.waiting):
            if budget == 0 or len(self.running) >= self.max_num_seqs:
                break
            n = min(seq.num_tokens - seq.num_computed, budget)
            if not self._try_grow(seq, seq.num_computed + n):
                continue  # the bug: someone behind it may jump the queue
            self.waiting.remove(seq)
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            self._scheduled[seq.seq_id] = n
            budget -= n
