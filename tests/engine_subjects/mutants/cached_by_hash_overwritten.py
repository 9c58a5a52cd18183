"""Bug: freed-but-cached blocks are kept in a map from hash to block id, and a block freed
with the hash of one already there overwrites its entry (tang-jiapeng/nano-vllm-v1).

Two blocks can hold the same hash: a block made full by decode is hashed without asking
whether a block with those tokens exists. When both are freed, the second takes the first's
place in the map, and the first is in no container at all, neither free nor cached nor used:
leaked for good, the pool one block smaller for the rest of the run. Caught by E3.
"""
# replaces nanovllm/engine/block_manager.py

from collections import OrderedDict

from nanovllm.engine._correct_block_manager import Block
from nanovllm.engine._correct_block_manager import BlockManager as _Correct
from nanovllm.engine.sequence import Sequence


class BlockManager(_Correct):
    def __init__(self, num_blocks: int, block_size: int):
        super().__init__(num_blocks, block_size)
        self.cached_blocks: OrderedDict[int, int] = OrderedDict()  # hash -> block id, LRU

    def _available(self) -> int:
        return len(self.free_block_ids) + len(self.cached_blocks)

    def _allocate_block(self, block_id: int) -> Block:
        block = self.blocks[block_id]
        assert block.ref_count == 0
        if self.cached_blocks.get(block.hash) == block_id:
            del self.cached_blocks[block.hash]
        elif block_id in self.free_block_ids:
            self.free_block_ids.remove(block_id)
        block.reset()
        self.used_block_ids.add(block_id)
        return block

    def _deallocate_block(self, block_id: int) -> None:
        block = self.blocks[block_id]
        assert block.ref_count == 0
        self.used_block_ids.remove(block_id)
        if block.hash != -1:
            self.cached_blocks[block.hash] = block_id  # the bug: may drop another block
            self.cached_blocks.move_to_end(block.hash)
        else:
            self.free_block_ids.append(block_id)

    def _allocate_fresh_block(self) -> int:
        if self.free_block_ids:
            block_id = self.free_block_ids[0]
        else:
            block_id = next(iter(self.cached_blocks.values()))  # evict the oldest
        old_hash = self.blocks[block_id].hash
        if old_hash != -1 and self.hash_to_block_id.get(old_hash) == block_id:
            del self.hash_to_block_id[old_hash]
        self._allocate_block(block_id)
        return block_id

    def can_allocate(self, seq: Sequence) -> int:
        hits = self._cached_prefix(seq)
        needed = seq.num_blocks - len(hits)
        hits_unused = sum(1 for b in hits if b not in self.used_block_ids)
        if needed + hits_unused > self._available():
            return -1
        return len(hits)

    def can_append(self, seq: Sequence) -> bool:
        return not self._needs_block(seq) or self._available() > 0
