"""Bug: finished keeps only the last 1,024 sequences (a history capped to a round number, to
save memory in a server that runs for days).

Symptom: past 1,024 finished requests the oldest leave `finished` and are in no queue at
all. No ordinary or larger workload finishes a thousand: found by the marathon (issue 47).
Caught by R1.
Outside the exhaustive scopes: they hold at most four requests.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]

HISTORY = 1024


class Scheduler(_Reference):
    def _finish(self, seq: Sequence) -> None:
        super()._finish(seq)
        if len(self.finished) > HISTORY:  # the bug: the contract keeps every finished one
            del self.finished[0]
