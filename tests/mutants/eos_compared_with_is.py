"""Bug: update() tests `token is self.eos_token_id` instead of `==`.

Symptom: an eos id outside CPython's small-int cache (-5..256), sampled at run time, is an
int equal to eos_token_id but another object: the sequence runs on past its eos. Eos ids of
real vocabularies (50256, 128001, 151643) are all such ints. Caught by A1 (issue 38).
Outside the exhaustive scopes: their eos_token_id is 0.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _ends(self, seq: Sequence, token: int) -> bool:
        return token is self.eos_token_id or len(seq.output) >= seq.max_tokens  # the bug
