"""Shape: a block pool with a third state (shunwendongan/nano-vllm-online-serving,
tang-jiapeng/nano-vllm-v1). A freed block that holds a hash leaves the used set for
`cached_block_ids`, not the free list: it stays findable by its hash until a fresh
allocation finds the free list empty and evicts the oldest cached block. The correct
engine, reshaped: it must pass, E3 counting free, cached and used blocks.
"""
# replaces nanovllm/engine/block_manager.py

from nanovllm.engine._correct_block_manager import Block
from nanovllm.engine._correct_block_manager import BlockManager as _Correct
from nanovllm.engine.sequence import Sequence


class BlockManager(_Correct):
    def __init__(self, num_blocks: int, block_size: int):
        super().__init__(num_blocks, block_size)
        self.cached_block_ids: dict[int, None] = {}  # an ordered set: the oldest first

    def _available(self) -> int:
        return len(self.free_block_ids) + len(self.cached_block_ids)

    def _allocate_block(self, block_id: int) -> Block:
        block = self.blocks[block_id]
        assert block.ref_count == 0
        block.reset()
        if block_id in self.cached_block_ids:
            del self.cached_block_ids[block_id]
        else:
            self.free_block_ids.remove(block_id)
        self.used_block_ids.add(block_id)
        return block

    def _deallocate_block(self, block_id: int) -> None:
        assert self.blocks[block_id].ref_count == 0
        self.used_block_ids.remove(block_id)
        if self.blocks[block_id].hash != -1:
            self.cached_block_ids[block_id] = None
        else:
            self.free_block_ids.append(block_id)

    def _allocate_fresh_block(self) -> int:
        if self.free_block_ids:
            block_id = self.free_block_ids[0]
        else:
            block_id = next(iter(self.cached_block_ids))  # evict the oldest cached block
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
