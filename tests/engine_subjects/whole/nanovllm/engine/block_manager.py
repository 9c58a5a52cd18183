import hashlib
from array import array
from collections import deque

from nanovllm.engine.sequence import Sequence


class Block:
    """One physical KV-cache block."""

    def __init__(self, block_id: int):
        self.block_id = block_id
        self.ref_count = 0
        self.hash = -1
        self.token_ids: list[int] = []

    def update(self, hash: int, token_ids: list[int]) -> None:
        self.hash = hash
        self.token_ids = list(token_ids)

    def reset(self) -> None:
        self.ref_count = 1
        self.hash = -1
        self.token_ids = []


class BlockManager:
    """Allocates KV-cache blocks to sequences, with prefix caching of full blocks."""

    def __init__(self, num_blocks: int, block_size: int):
        self.block_size = block_size
        self.blocks: list[Block] = [Block(i) for i in range(num_blocks)]
        self.hash_to_block_id: dict[int, int] = {}
        self.free_block_ids: deque[int] = deque(range(num_blocks))
        self.used_block_ids: set[int] = set()

    @staticmethod
    def compute_hash(token_ids: list[int], prefix: int = -1) -> int:
        """Hash of a block's token ids chained with the previous block's hash."""
        h = hashlib.blake2b(digest_size=8)
        h.update(prefix.to_bytes(8, "little", signed=True))
        h.update(array("q", token_ids).tobytes())
        return int.from_bytes(h.digest(), "little") >> 1  # in [0, 2**63): never -1

    def _allocate_block(self, block_id: int) -> Block:
        block = self.blocks[block_id]
        assert block.ref_count == 0
        block.reset()
        self.free_block_ids.remove(block_id)
        self.used_block_ids.add(block_id)
        return block

    def _deallocate_block(self, block_id: int) -> None:
        assert self.blocks[block_id].ref_count == 0
        self.used_block_ids.remove(block_id)
        self.free_block_ids.append(block_id)  # keeps hash/token_ids for later hits

    def _allocate_fresh_block(self) -> int:
        """Take the block at the head of the free list, forgetting its old content."""
        block_id = self.free_block_ids[0]
        old = self.blocks[block_id]
        if old.hash != -1 and self.hash_to_block_id.get(old.hash) == block_id:
            del self.hash_to_block_id[old.hash]
            # Another block may hold the same prefix (the copy a whole-prompt hit
            # recomputes, or two sequences that decoded the same tokens): keep it findable.
            for other in self.blocks:
                if (
                    other.block_id != block_id
                    and other.hash == old.hash
                    and other.token_ids == old.token_ids
                ):
                    self.hash_to_block_id[old.hash] = other.block_id
                    break
        self._allocate_block(block_id)
        return block_id

    def _record(self, seq: Sequence, i: int) -> None:
        """Record the hash and token ids of seq's full block i (its KV is, or is being,
        computed), so that later requests with the same prefix hit it."""
        token_ids = seq.block(i)
        assert len(token_ids) == self.block_size  # a block that is not full gets no hash
        prefix = self.blocks[seq.block_table[i - 1]].hash if i > 0 else -1
        h = self.compute_hash(token_ids, prefix)
        block_id = seq.block_table[i]
        self.blocks[block_id].update(h, token_ids)
        self.hash_to_block_id[h] = block_id

    def _cached_prefix(self, seq: Sequence) -> list[int]:
        """Block ids of the leading full blocks of seq found in the cache."""
        hits: list[int] = []
        h = -1
        for i in range(seq.num_blocks):
            token_ids = seq.block(i)
            if len(token_ids) != self.block_size:
                break
            h = self.compute_hash(token_ids, h)
            block_id = self.hash_to_block_id.get(h, -1)
            if block_id == -1 or self.blocks[block_id].token_ids != token_ids:
                break  # a miss, or a stale entry: the block was reused for other tokens
            hits.append(block_id)
        if hits and len(hits) * self.block_size >= len(seq):
            hits.pop()  # the last token must always be computed
        return hits

    def can_allocate(self, seq: Sequence) -> bool:
        """Whether seq's blocks fit: a cached hit sitting in the free list takes a free
        block as a fresh one does."""
        hits = self._cached_prefix(seq)
        needed = seq.num_blocks - len(hits)
        hits_in_free = sum(1 for b in hits if b not in self.used_block_ids)
        return needed + hits_in_free <= len(self.free_block_ids)

    def allocate(self, seq: Sequence) -> None:
        """Give seq its blocks: the cached leading full blocks first, then fresh ones;
        record the hash of every full block (the prefill computes all of them)."""
        assert not seq.block_table
        hits = self._cached_prefix(seq)
        for block_id in hits:
            if block_id in self.used_block_ids:
                self.blocks[block_id].ref_count += 1
            else:
                block = self.blocks[block_id]
                hash, token_ids = block.hash, block.token_ids
                self._allocate_block(block_id)
                block.update(hash, token_ids)
            seq.block_table.append(block_id)
        seq.num_cached_tokens = len(hits) * self.block_size
        for i in range(len(hits), seq.num_blocks):
            seq.block_table.append(self._allocate_fresh_block())
            if len(seq.block(i)) == self.block_size:
                self._record(seq, i)

    def deallocate(self, seq: Sequence) -> None:
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self._deallocate_block(block_id)
        seq.num_cached_tokens = 0
        seq.block_table.clear()

    def _needs_block(self, seq: Sequence) -> bool:
        # A decode step computes the KV of position len(seq) - 1.
        return len(seq) > len(seq.block_table) * self.block_size

    def can_append(self, seq: Sequence) -> bool:
        return not self._needs_block(seq) or len(self.free_block_ids) > 0

    def may_append(self, seq: Sequence) -> None:
        if self._needs_block(seq):
            seq.block_table.append(self._allocate_fresh_block())

    def hash_blocks(self, seq: Sequence) -> None:
        """After a decode step (before its sampled token is appended): the step computed
        position len(seq) - 1; when that filled its block, record the block's hash."""
        if len(seq) % self.block_size == 0:
            self._record(seq, len(seq) // self.block_size - 1)
