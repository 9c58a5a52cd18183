"""Bug: update() frees a finished sequence's blocks one by one, and counts down the pool's
`blocks_used` instead of the sequence's `num_blocks`.

`while seq.num_blocks > 0: self.blocks_used -= 1`: the loop's condition never changes, so
update() spins at the first finish (issue 54's update() shape). Caught by C1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _finish(self, seq: Sequence) -> None:
        seq.status = SequenceStatus.FINISHED
        while seq.num_blocks > 0:
            self.blocks_used -= 1  # the bug: seq.num_blocks -= 1 is missing
        self.finished.append(seq)
