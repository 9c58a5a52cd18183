"""Bug: an assertion that no sequence is preempted twice fails when one is.

The student's debugging assert holds in every worked example. Symptom: schedule()
raises AssertionError under sustained pressure. Caught by C1; needs a sequence
preempted twice.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._preempted_before: set[str] = set()

    def _preempt(self, seq: Sequence) -> None:
        assert seq.seq_id not in self._preempted_before, "preempted twice"  # the bug
        self._preempted_before.add(seq.seq_id)
        super()._preempt(seq)
