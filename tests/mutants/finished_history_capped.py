"""Bug: finished keeps only the last 64 sequences (a history capped to save memory).

Symptom: past 64 finished requests, the oldest is in no queue at all. The ordinary
workloads never finish more than 8: found by the larger stage. Caught by I6.
Outside the exhaustive scopes: they hold at most four requests.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]

HISTORY = 64


class Scheduler(_Reference):
    def _finish(self, seq: Sequence) -> None:
        super()._finish(seq)
        if len(self.finished) > HISTORY:  # the bug: the contract keeps every finished one
            del self.finished[0]
