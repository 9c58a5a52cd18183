"""Bug: after a prefix-cache hit, prefill schedules the whole prompt from the cached point.

The fork measures what is left to compute before allocate(), which is where a hit sets
num_cached_tokens. Symptom: a sequence that hits the cache is sized for all its tokens
from the cached point on. When the budget holds them, the model runner computes positions
past its end; when it does not, the sequence is taken for a chunk though its prefill
completes, and postprocess() cannot find it in running. Caught by E1 or E6.
"""
# replaces nanovllm/engine/scheduler.py

from nanovllm.engine._correct_scheduler import Scheduler as _Correct
from nanovllm.engine.sequence import Sequence, SequenceStatus


class Scheduler(_Correct):
    def schedule(self) -> tuple[list[Sequence], bool]:
        scheduled: list[Sequence] = []
        num_batched_tokens = 0
        while self.waiting and len(scheduled) < self.max_num_seqs:
            seq = self.waiting[0]
            remaining = len(seq) - seq.num_cached_tokens  # the bug: before allocate()
            if not seq.block_table:
                num_cached_blocks = self.block_manager.can_allocate(seq)
                if num_cached_blocks == -1:
                    break
                self.block_manager.allocate(seq, num_cached_blocks)
            budget = self.max_num_batched_tokens - num_batched_tokens
            if remaining > budget:
                if not scheduled and budget > 0:
                    seq.num_scheduled_tokens = budget
                    scheduled.append(seq)
                break
            seq.num_scheduled_tokens = remaining
            num_batched_tokens += remaining
            seq.status = SequenceStatus.RUNNING
            self.waiting.popleft()
            self.running.append(seq)
            scheduled.append(seq)
        if scheduled:
            return scheduled, True
        return super().schedule()  # no prefill: the correct decode
