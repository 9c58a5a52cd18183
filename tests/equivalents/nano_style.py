"""Equivalent: nano-vllm-style engine code; num_tokens is a plain attribute bumped by hand.

Written the way nano-vllm's engine reads: short methods, `len(seq)` for the token count, a
class-wide `itertools.count()` numbering sequences in creation order (only shown in `repr`).
`num_tokens` is not a property: `append_token()` is the one place output grows, and it keeps
the counter in step. Block bookkeeping is the trio `can_grow`/`grow`/`release`. Phase 1 pops
running sequences off the front of a deque and preempts from its back, the way nano-vllm's
decode loop does, then rebuilds `running` as the scheduled ones followed by those the budget
did not reach.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from enum import Enum, auto
from itertools import count


class SequenceStatus(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


class Sequence:
    counter = count()

    def __init__(self, seq_id: str, prompt_len: int, max_tokens: int) -> None:
        self.uid = next(Sequence.counter)
        self.seq_id = seq_id
        self.status = SequenceStatus.WAITING
        self.prompt_len = prompt_len
        self.max_tokens = max_tokens
        self.output: list[int] = []
        self.num_tokens = prompt_len  # prompt + output; only append_token() changes it
        self.num_computed = 0
        self.num_blocks = 0

    def __len__(self) -> int:
        return self.num_tokens

    def __repr__(self) -> str:
        return f"Sequence#{self.uid}({self.seq_id}, {self.num_computed}/{len(self)})"

    def append_token(self, token: int) -> None:
        self.output.append(token)
        self.num_tokens += 1


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
        self.blocks_used = 0
        self.num_preemptions = 0
        self.scheduled: dict[str, int] = {}  # read by update()

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    # KV blocks: a sequence computing n tokens holds ceil((num_computed + n) / block_size).

    def _extra_blocks(self, seq: Sequence, n: int) -> int:
        return -(-(seq.num_computed + n) // self.block_size) - seq.num_blocks

    def can_grow(self, seq: Sequence, n: int) -> bool:
        return self.blocks_used + self._extra_blocks(seq, n) <= self.num_blocks

    def grow(self, seq: Sequence, n: int) -> None:
        extra = max(self._extra_blocks(seq, n), 0)
        seq.num_blocks += extra
        self.blocks_used += extra

    def release(self, seq: Sequence) -> None:
        self.blocks_used -= seq.num_blocks
        seq.num_blocks = 0

    def preempt(self, seq: Sequence) -> None:
        self.release(seq)
        seq.num_computed = 0  # KV is gone, the output stays: recompute on return
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)
        self.num_preemptions += 1

    def schedule(self) -> dict[str, int]:
        budget = self.max_num_batched_tokens
        scheduled: dict[str, int] = {}

        # Decode / unfinished prefill. Victims always come off the back of `todo`,
        # which is the back of running.
        todo = deque(self.running)
        kept: list[Sequence] = []
        while todo and budget:
            seq = todo.popleft()
            n = min(len(seq) - seq.num_computed, budget)
            while not self.can_grow(seq, n):
                if todo:
                    self.preempt(todo.pop())
                else:
                    self.preempt(seq)
                    break
            else:
                self.grow(seq, n)
                kept.append(seq)
                scheduled[seq.seq_id] = n
                budget -= n
        self.running = kept + list(todo)

        # Admission, strictly first come first served.
        while self.waiting and budget and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            n = min(len(seq) - seq.num_computed, budget)
            if not self.can_grow(seq, n):
                break
            self.grow(seq, n)
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            scheduled[seq.seq_id] = n
            budget -= n

        self.scheduled = scheduled
        return dict(scheduled)

    def update(self) -> list[Sequence]:
        scheduled, self.scheduled = self.scheduled, {}
        seqs = {seq.seq_id: seq for seq in self.running}
        done = []
        for seq_id, n in scheduled.items():
            seq = seqs[seq_id]
            seq.num_computed += n
            if seq.num_computed < len(seq):
                continue
            token = self.sample_fn(seq)
            seq.append_token(token)
            if token == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                seq.status = SequenceStatus.FINISHED
                self.release(seq)
                self.finished.append(seq)
                done.append(seq)
        if done:
            self.running = [seq for seq in self.running if seq.status != SequenceStatus.FINISHED]
        return done
