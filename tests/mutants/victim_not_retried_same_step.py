"""Bug: a sequence preempted in phase 1 is not tried again in phase 2 of the same step.

The student stops phase 2 when waiting[0] was preempted this step. Symptom: budget and
blocks the victim could use (chunked) sit idle for a step. Caught by R1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._preempted_now: set[str] = set()

    def schedule(self) -> dict[str, int]:
        self._preempted_now = set()
        return super().schedule()

    def _preempt(self, seq: Sequence) -> None:
        super()._preempt(seq)
        self._preempted_now.add(seq.seq_id)

    def _schedule_waiting(self, budget: int) -> None:
        if self.waiting and self.waiting[0].seq_id in self._preempted_now:
            return  # the bug: it just lost its blocks, so it waits for the next step
        super()._schedule_waiting(budget)
