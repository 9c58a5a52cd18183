"""Bug: phase 2 spins when every KV block is in use, waiting for one to be freed.

Only update() frees blocks, so the loop never ends. Symptom: schedule() hangs as soon
as all blocks are used while a request waits. Caught by C1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _schedule_waiting(self, budget: int) -> None:
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            if self.blocks_used == self.num_blocks:
                continue  # the bug: wait until a block is free
            seq = self.waiting[0]
            n = min(seq.num_tokens - seq.num_computed, budget)
            if not self._try_grow(seq, seq.num_computed + n):
                break
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            self._scheduled[seq.seq_id] = n
            budget -= n
