"""Bug: num_preemptions is the length of a log of the last 1,024 preemptions (a bounded
`deque` kept for debugging, read back as the count).

Symptom: past 1,024 preemptions the count stops growing. No ordinary or larger workload
preempts a thousand times: found by the marathon (issue 47). Caught by R1.
Outside the exhaustive scopes: they hold at most four requests.
"""

from collections import deque

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]

LOG = 1024


class Scheduler(_Reference):
    def __init__(self, **kwargs: object) -> None:
        self.preemption_log: deque[str] = deque(maxlen=LOG)
        super().__init__(**kwargs)  # type: ignore[arg-type]

    @property  # type: ignore[override]
    def num_preemptions(self) -> int:
        return len(self.preemption_log)  # the bug: the log is bounded, the count is not

    @num_preemptions.setter
    def num_preemptions(self, value: int) -> None:
        if value:  # the reference counts one more: log the preemption instead
            self.preemption_log.append(self.waiting[0].seq_id)
