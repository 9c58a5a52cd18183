"""Bug: the token budget starts at max_num_batched_tokens + 1.

Symptom: a step can schedule one token more than the budget. Caught by I2.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def schedule(self) -> dict[str, int]:
        self._scheduled = {}
        budget = self._schedule_running(self.max_num_batched_tokens + 1)  # the bug: + 1
        self._schedule_waiting(budget)
        return dict(self._scheduled)
