"""Bug: a cache hit on a block in the free list resets its metadata but leaves it free.

The fork revives the cached block by hand (ref_count 1, hash and tokens restored, marked
used) and forgets to take it out of the free list. Symptom: the next fresh allocation
hands the same block to another sequence, which overwrites the KV the first one reads.
Caught by E3.
"""
# replaces nanovllm/engine/block_manager.py

from nanovllm.engine._correct_block_manager import Block  # noqa: F401
from nanovllm.engine._correct_block_manager import BlockManager as _Correct
from nanovllm.engine.sequence import Sequence


class BlockManager(_Correct):
    def allocate(self, seq: Sequence, num_cached_blocks: int) -> None:
        assert not seq.block_table
        hits = self._cached_prefix(seq)
        for block_id in hits[:num_cached_blocks]:
            block = self.blocks[block_id]
            if block_id in self.used_block_ids:
                block.ref_count += 1
            else:
                hash, token_ids = block.hash, block.token_ids
                block.reset()  # the bug: reset in place, still in free_block_ids
                block.update(hash, token_ids)
                self.used_block_ids.add(block_id)
            seq.block_table.append(block_id)
        seq.num_cached_tokens = num_cached_blocks * self.block_size
        for _ in range(num_cached_blocks, seq.num_blocks):
            seq.block_table.append(self._allocate_fresh_block())
