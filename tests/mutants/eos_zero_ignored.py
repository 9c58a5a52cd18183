"""Bug: eos tested by truthiness, so eos_token_id 0 never ends a sequence.

Symptom: with eos_token_id 0, a sequence runs on to max_tokens. Caught by A1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _ends(self, seq: Sequence, token: int) -> bool:
        eos = self.eos_token_id and token == self.eos_token_id  # the bug: 0 is falsy
        return bool(eos) or len(seq.output) >= seq.max_tokens
