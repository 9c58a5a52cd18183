"""Bug: KV blocks counted on num_tokens instead of num_computed + n (spec bug table, row 1).

Symptom: a chunked prefill grabs all its blocks early; needless preemption. Caught by I7.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _try_grow(self, seq: Sequence, num_tokens: int) -> bool:
        return super()._try_grow(seq, seq.num_tokens)
