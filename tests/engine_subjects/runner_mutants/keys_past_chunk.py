"""A chunk's attention spans the whole sequence (its key length the sequence's length, not
the chunk's end), as nano-vllm's prepare_prefill had it before 25794a1: attention aligns
the chunk's queries to the last positions and reads keys not yet computed. Caught by E1."""

# replaces nanovllm/engine/model_runner.py
import torch
from nanovllm.engine._correct_model_runner import ModelRunner as _ModelRunner
from nanovllm.utils.context import get_context, set_context


class ModelRunner(_ModelRunner):
    def prepare_prefill(self, seqs):
        input_ids, positions = super().prepare_prefill(seqs)
        context = get_context()
        cu_seqlens_k = [0]
        for seq in seqs:
            cu_seqlens_k.append(cu_seqlens_k[-1] + len(seq))
        block_tables = context.block_tables
        if block_tables is None and cu_seqlens_k[-1] > int(context.cu_seqlens_q[-1]):
            block_tables = self.prepare_block_tables(seqs)
        set_context(
            True,
            context.cu_seqlens_q,
            torch.tensor(cu_seqlens_k, dtype=torch.int32),
            context.slot_mapping,
            None,
            block_tables,
        )
        return input_ids, positions
