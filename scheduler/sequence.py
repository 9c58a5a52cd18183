"""One request as the scheduler sees it: a prompt, what it has generated, what its KV holds.

The names and fields are the submission contract's (docs/contract.md).
"""

from __future__ import annotations

import enum


class SequenceStatus(enum.Enum):
    """Where a sequence is: I6 says it is in exactly the matching queue."""

    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


def require_positive_int(field: str, value: object) -> int:
    """Return `value` if it is a positive int, else raise a ValueError naming `field`.

    bool is refused although it subclasses int: `max_tokens=True` is a bug, not a 1.
    """
    if type(value) is not int or value < 1:
        raise ValueError(f"{field} must be a positive int, got {value!r}")
    return value


class Sequence:
    """A request: `prompt_len` prompt tokens, up to `max_tokens` generated ones.

    `num_computed` counts tokens whose KV is computed; `num_blocks` the KV blocks held.
    Preemption (I4) resets those two and `status`, never `output`.
    """

    def __init__(self, seq_id: str, prompt_len: int, max_tokens: int) -> None:
        if type(seq_id) is not str or not seq_id:
            raise ValueError(f"seq_id must be a non-empty str, got {seq_id!r}")
        require_positive_int("prompt_len", prompt_len)
        require_positive_int("max_tokens", max_tokens)
        self.seq_id = seq_id
        self.prompt_len = prompt_len
        self.max_tokens = max_tokens
        self.output: list[int] = []
        self.num_computed = 0
        self.num_blocks = 0
        self.status = SequenceStatus.WAITING

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens: what a recompute after preemption must compute."""
        return self.prompt_len + len(self.output)

    def __repr__(self) -> str:
        return (
            f"Sequence({self.seq_id!r}, {self.status.name}, "
            f"computed {self.num_computed}/{self.num_tokens}, blocks {self.num_blocks}, "
            f"output {self.output})"
        )
