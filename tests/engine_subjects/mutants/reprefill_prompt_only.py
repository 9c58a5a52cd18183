"""Bug: a sequence preempted after output is re-prefilled up to the end of its prompt only
(lingebeng/nano-vllm-plus 8040865: its chunk is `num_prompt_tokens - num_computed_tokens`).

The token sampled at the prompt's last position is appended as its next output, and the
outputs' KV is never written again: a later decode reads positions nothing wrote.
Caught by E2 or E7.
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
            if not seq.block_table:
                num_cached_blocks = self.block_manager.can_allocate(seq)
                if num_cached_blocks == -1:
                    break
                self.block_manager.allocate(seq, num_cached_blocks)
            # the bug: the prompt's end, not the sequence's
            remaining = max(seq.num_prompt_tokens - seq.num_cached_tokens, 1)
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

    def postprocess(self, seqs: list[Sequence], token_ids: list[int], is_prefill: bool) -> None:
        for seq, token_id in zip(seqs, token_ids, strict=True):
            self.block_manager.hash_blocks(seq)
            seq.num_cached_tokens += seq.num_scheduled_tokens
            if is_prefill and seq.num_cached_tokens < seq.num_prompt_tokens:  # the bug
                seq.num_scheduled_tokens = 0
                continue
            seq.num_cached_tokens = max(seq.num_cached_tokens, len(seq))  # "computed"
            seq.append_token(token_id)
            seq.num_scheduled_tokens = 0
            eos = not seq.ignore_eos and token_id == self.eos
            if eos or seq.num_completion_tokens == seq.max_tokens:
                seq.status = SequenceStatus.FINISHED
                self.block_manager.deallocate(seq)
                self.running.remove(seq)
