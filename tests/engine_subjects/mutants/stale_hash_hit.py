"""Bug: a prefix-cache hit trusts the hash table without comparing the block's tokens.

The fork keeps stale hash entries when a block is reused (as nano-vllm does) and dropped
the token comparison that guards them. Symptom: a request whose prefix hashes to a stale
entry attends to the KV of whatever the block holds now. Caught by E2.
"""
# replaces nanovllm/engine/block_manager.py

from nanovllm.engine._correct_block_manager import Block  # noqa: F401
from nanovllm.engine._correct_block_manager import BlockManager as _Correct
from nanovllm.engine.sequence import Sequence


class BlockManager(_Correct):
    def _allocate_fresh_block(self) -> int:
        block_id = self.free_block_ids[0]
        self._allocate_block(block_id)  # its old hash entry stays: stale from now on
        return block_id

    def _cached_prefix(self, seq: Sequence) -> list[int]:
        hits: list[int] = []
        h = -1
        for i in range(seq.num_blocks):
            token_ids = seq.block(i)
            if len(token_ids) != self.block_size:
                break
            h = self.compute_hash(token_ids, h)
            block_id = self.hash_to_block_id.get(h, -1)
            if block_id == -1:  # the bug: no check that the block still holds token_ids
                break
            hits.append(block_id)
        if hits and len(hits) * self.block_size >= len(seq):
            hits.pop()
        return hits
