"""Bug: update() never compares the sampled token with eos_token_id.

Symptom: a sequence that samples eos runs on to max_tokens. Caught by A1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _ends(self, seq: Sequence, token: int) -> bool:
        return len(seq.output) >= seq.max_tokens  # the bug: no token == eos_token_id
