"""The block size is a class attribute set by the engine in its own process only (nano-vllm
55c64e7 to 9e8507e: `block_size = 0`, set by `Sequence.set_block_size`): a spawned worker
keeps the class's 0 and divides by it on its first prefill. Caught by E8."""

# replaces nanovllm/engine/sequence.py
from nanovllm.engine._correct_sequence import Sequence as _Sequence
from nanovllm.engine._correct_sequence import SequenceStatus  # noqa: F401


class Sequence(_Sequence):
    block_size = 0  # set by the engine

    @property
    def num_cached_blocks(self) -> int:
        return self.num_cached_tokens // self.block_size
