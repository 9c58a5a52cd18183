"""Bug: `Sequence.__init__(..., output=[])`, a mutable default: every sequence ever made
shares one output list, across requests and across schedulers.

Symptom: a sequence's output holds other sequences' tokens, and what a run does depends on
the runs before it in the same process (a student's round-1 bug, issue 56). Caught by A1, C1
or D1 (a spec example's second sequence gets the first one's token at once).
"""

from schedcheck.scheduler import Scheduler, SequenceStatus
from schedcheck.scheduler import Sequence as _Sequence

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Sequence(_Sequence):
    def __init__(
        self,
        seq_id: str,
        prompt_len: int,
        max_tokens: int,
        output: list[int] = [],  # noqa: B006 (the bug: one list for every sequence)
    ) -> None:
        super().__init__(seq_id, prompt_len, max_tokens)
        self.output = output
