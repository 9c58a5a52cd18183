"""Equivalent: `blocks_used` is a read-only property summing `num_blocks` over `running`.

Only one place holds the KV count: each sequence's `num_blocks`. The scheduler's total is
derived from `running` on demand, so it cannot drift from the per-sequence counts. The
status enum mixes in `str` (handy for logging and JSON), the sequence is a dataclass, and
`schedule()` saves `{seq_id: (seq, n)}` so that `update()` needs no lookup by id.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field


class SequenceStatus(str, enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


# eq=False: two requests with equal fields are still different requests.
@dataclass(eq=False)
class Sequence:
    seq_id: str
    prompt_len: int
    max_tokens: int
    output: list[int] = field(default_factory=list)
    num_computed: int = 0
    num_blocks: int = 0
    status: SequenceStatus = SequenceStatus.WAITING

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + len(self.output)

    @property
    def uncomputed(self) -> int:
        return self.num_tokens - self.num_computed


class Scheduler:
    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        sample_fn: Callable[[Sequence], int],
        eos_token_id: int | None = None,
    ) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.sample_fn = sample_fn
        self.eos_token_id = eos_token_id
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.finished: list[Sequence] = []
        self.num_preemptions = 0
        self._step: dict[str, tuple[Sequence, int]] = {}

    @property
    def blocks_used(self) -> int:
        # Waiting and finished sequences always hold 0 blocks, so running is enough.
        return sum(seq.num_blocks for seq in self.running)

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def _grow_to(self, seq: Sequence, tokens: int) -> bool:
        """All or nothing: give seq enough blocks for `tokens` tokens if they are free."""
        # Integer ceil: float division could round wrong on very long sequences.
        full, partial = divmod(tokens, self.block_size)
        needed = full + (partial > 0) - seq.num_blocks
        if needed > self.num_blocks - self.blocks_used:
            return False
        seq.num_blocks += max(needed, 0)
        return True

    def _preempt_last(self) -> Sequence:
        victim = self.running.pop()
        victim.num_blocks = 0  # leaving running is what returns the blocks
        victim.num_computed = 0
        victim.status = SequenceStatus.WAITING
        self.waiting.appendleft(victim)
        self.num_preemptions += 1
        return victim

    def _make_room(self, seq: Sequence, n: int) -> bool:
        """Preempt from the back until seq's next n tokens fit; False if seq was evicted."""
        while not self._grow_to(seq, seq.num_computed + n):
            if self._preempt_last() is seq:
                return False
        return True

    def schedule(self) -> dict[str, int]:
        step: dict[str, tuple[Sequence, int]] = {}
        budget = self.max_num_batched_tokens

        pos = 0
        while pos < len(self.running) and budget > 0:
            seq = self.running[pos]
            n = min(seq.uncomputed, budget)
            if not self._make_room(seq, n):
                continue  # seq left running, so running[pos] is the next one now
            step[seq.seq_id] = (seq, n)
            budget -= n
            pos += 1

        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            n = min(seq.uncomputed, budget)
            # Strict FCFS: if the head does not fit, nobody behind it goes either.
            if not self._grow_to(seq, seq.num_computed + n):
                break
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            step[seq.seq_id] = (seq, n)
            budget -= n

        self._step = step
        return {seq_id: n for seq_id, (_, n) in step.items()}

    def update(self) -> list[Sequence]:
        step, self._step = self._step, {}
        ended: list[Sequence] = []
        for seq, n in step.values():
            seq.num_computed += n
            if seq.num_computed < seq.num_tokens:
                continue
            token = self.sample_fn(seq)
            seq.output.append(token)
            if token == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                seq.status = SequenceStatus.FINISHED
                seq.num_blocks = 0
                self.finished.append(seq)
                ended.append(seq)
        if ended:
            self.running = [seq for seq in self.running if seq.status is SequenceStatus.RUNNING]
        return ended
