"""A decode writes its KV into the first block of its table, not the block of its position:
right while a sequence has one block, then a later read of the first block finds the
decode's KV where an earlier position's should be. Caught by E2."""

# replaces nanovllm/engine/model_runner.py
import torch
from nanovllm.engine._correct_model_runner import ModelRunner as _ModelRunner
from nanovllm.utils.context import get_context, set_context


class ModelRunner(_ModelRunner):
    def prepare_decode(self, seqs):
        input_ids, positions = super().prepare_decode(seqs)
        context = get_context()
        slots = [
            seq.block_table[0] * self.block_size + (len(seq) - 1) % self.block_size for seq in seqs
        ]
        set_context(
            False,
            slot_mapping=torch.tensor(slots, dtype=torch.int32),
            context_lens=context.context_lens,
            block_tables=context.block_tables,
        )
        return input_ids, positions
