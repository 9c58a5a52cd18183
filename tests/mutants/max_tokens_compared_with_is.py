"""Bug: update() tests `len(seq.output) is seq.max_tokens` instead of `>=`.

Symptom: up to 256 the two ints are CPython's cached objects and the test works; a request
of max_tokens 257 or more never finishes by length and runs past it. The ordinary
workloads never ask for more than 8 tokens: found by the larger stage. Caught by A1.
Outside the exhaustive scopes: their outputs are a few tokens long.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _ends(self, seq: Sequence, token: int) -> bool:
        return token == self.eos_token_id or len(seq.output) is seq.max_tokens  # the bug
