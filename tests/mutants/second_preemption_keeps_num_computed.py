"""Bug: a sequence preempted a second time keeps its num_computed.

The student reset num_computed only for sequences never preempted before. Symptom: on
its second return it skips the recompute of its KV. Caught by I7; needs a sequence
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
        kept = seq.num_computed
        super()._preempt(seq)
        if seq.seq_id in self._preempted_before:
            seq.num_computed = kept  # the bug
        self._preempted_before.add(seq.seq_id)
