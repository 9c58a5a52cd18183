"""Bug: a prompt whose every block is cached counts all of them as cached.

The fork dropped the rule that the last token is always computed. Symptom: a whole-prompt
cache hit leaves nothing to compute: the sequence is scheduled for zero tokens, and the
model has no logits to sample its next token from. Caught by E1.
"""
# replaces nanovllm/engine/block_manager.py

from nanovllm.engine._correct_block_manager import Block  # noqa: F401
from nanovllm.engine._correct_block_manager import BlockManager as _Correct
from nanovllm.engine.sequence import Sequence


class BlockManager(_Correct):
    def _cached_prefix(self, seq: Sequence) -> list[int]:
        hits: list[int] = []
        h = -1
        for i in range(seq.num_blocks):
            token_ids = seq.block(i)
            if len(token_ids) != self.block_size:
                break
            h = self.compute_hash(token_ids, h)
            block_id = self.hash_to_block_id.get(h, -1)
            if block_id == -1 or self.blocks[block_id].token_ids != token_ids:
                break
            hits.append(block_id)
        return hits  # the bug: all of them, the block holding the last token too
