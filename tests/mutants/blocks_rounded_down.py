"""Bug: KV blocks for a token count are rounded down (floor division, not ceiling).

Symptom: a sequence holds fewer blocks than its computed tokens need. Caught by I7.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _blocks_for(self, num_tokens: int) -> int:
        return num_tokens // self.block_size  # the bug: floor, so a partial block is lost
