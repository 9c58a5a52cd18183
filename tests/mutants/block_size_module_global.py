"""Bug: the block size is kept in a module global, set by each Scheduler() built.

Right for one scheduler at a time (each run builds its own, and sets it first); with two
alive at once, the first counts its blocks in the second's block size (issue 47).
Found by two schedulers alive at once; no run of one scheduler shows it. Caught by A1,
C1, I1, I7 or R1 (C1: the reference's own add() refuses a request by the wrong size).
Outside the exhaustive scopes: they run one scheduler at a time.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]

_BLOCK_SIZE = 1


class Scheduler(_Reference):
    def __init__(self, **kwargs: object) -> None:
        global _BLOCK_SIZE
        super().__init__(**kwargs)  # type: ignore[arg-type]
        _BLOCK_SIZE = self.block_size  # the bug: the module's, not this scheduler's

    def _blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // _BLOCK_SIZE)
