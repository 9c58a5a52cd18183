"""Bug: a sequence finishes only when len(output) > max_tokens.

Symptom: every sequence that does not hit eos generates one token too many. Caught by A1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _ends(self, seq: Sequence, token: int) -> bool:
        return token == self.eos_token_id or len(seq.output) > seq.max_tokens  # the bug: >
