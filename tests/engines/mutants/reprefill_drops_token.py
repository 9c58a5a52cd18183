"""Bug: the token sampled at the end of a re-prefill after preemption is dropped.

The fork reasons that a recompute only rebuilds KV the sequence had, so it samples
nothing new. Symptom: the sequence stands with its KV computed to the end and no new
token; the next decode step computes a position past its end, and its output loses a
token. Caught by E1 or E7.
"""
# replaces nanovllm/engine/scheduler.py

from nanovllm.engine._correct_scheduler import Scheduler as _Correct
from nanovllm.engine.sequence import Sequence, SequenceStatus


class Scheduler(_Correct):
    def postprocess(self, seqs: list[Sequence], token_ids: list[int], is_prefill: bool) -> None:
        for seq, token_id in zip(seqs, token_ids, strict=True):
            self.block_manager.hash_blocks(seq)
            seq.num_cached_tokens += seq.num_scheduled_tokens
            seq.num_scheduled_tokens = 0
            if is_prefill and seq.num_cached_tokens < len(seq):
                continue
            if is_prefill and seq.num_completion_tokens > 0:
                continue  # the bug: a recompute's token is the next one, and it is lost
            seq.append_token(token_id)
            eos = not seq.ignore_eos and token_id == self.eos
            if eos or seq.num_completion_tokens == seq.max_tokens:
                seq.status = SequenceStatus.FINISHED
                self.block_manager.deallocate(seq)
                self.running.remove(seq)
