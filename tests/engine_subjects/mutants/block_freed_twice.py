"""Bug: deallocate returns every block of the table to the free list, shared or not.

The fork lowers the ref count but frees the block whatever the count left. Symptom: a
prefix block shared by two sequences is freed while the second still holds it, and again
when that one lets go: it sits in the free list twice. Caught by E3.
"""
# replaces nanovllm/engine/block_manager.py

from nanovllm.engine._correct_block_manager import Block  # noqa: F401
from nanovllm.engine._correct_block_manager import BlockManager as _Correct
from nanovllm.engine.sequence import Sequence


class BlockManager(_Correct):
    def deallocate(self, seq: Sequence) -> None:
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count = max(block.ref_count - 1, 0)
            self.used_block_ids.discard(block_id)
            self.free_block_ids.append(block_id)  # the bug: even while others hold it
        seq.num_cached_tokens = 0
        seq.block_table.clear()
