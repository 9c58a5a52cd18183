"""Equivalent: IntEnum statuses with a falsy WAITING = 0, (seq, n) pairs as the step record.

This student numbers the statuses with `enum.IntEnum` (WAITING = 0, RUNNING = 1,
FINISHED = 2), so a status is never tested for truthiness, only compared to a member. Block
counts round up with floor division, `(k + bs - 1) // bs`. What `schedule()` decided is kept
as a list of `(seq, n)` pairs holding the sequence objects themselves, so `update()` needs no
lookup by id; `schedule()` hands out a fresh dict built from that list.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable


class SequenceStatus(enum.IntEnum):
    WAITING = 0
    RUNNING = 1
    FINISHED = 2


class Sequence:
    def __init__(self, seq_id: str, prompt_len: int, max_tokens: int) -> None:
        self.seq_id = seq_id
        self.prompt_len = prompt_len
        self.max_tokens = max_tokens
        self.output: list[int] = []
        self.num_computed = 0
        self.num_blocks = 0
        self.status = SequenceStatus.WAITING

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + len(self.output)


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
        self._step: list[tuple[Sequence, int]] = []

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def _try_alloc(self, seq: Sequence, n: int) -> bool:
        """Blocks for the computed tokens plus n more; all or nothing."""
        held = seq.num_computed + n
        target = (held + self.block_size - 1) // self.block_size
        delta = target - seq.num_blocks
        if delta <= 0:
            return True
        if self.blocks_used + delta > self.num_blocks:
            return False
        self.blocks_used += delta
        seq.num_blocks = target
        return True

    def _drop_blocks(self, seq: Sequence) -> None:
        self.blocks_used -= seq.num_blocks
        seq.num_blocks = 0

    def _preempt_newest(self) -> Sequence:
        # The most recently admitted sequence gives way; it keeps its output and will
        # recompute prompt + output when it comes back, ahead of everyone waiting.
        seq = self.running.pop()
        self._drop_blocks(seq)
        seq.num_computed = 0
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)
        self.num_preemptions += 1
        return seq

    def schedule(self) -> dict[str, int]:
        budget = self.max_num_batched_tokens
        step: list[tuple[Sequence, int]] = []

        pos = 0
        while budget > 0 and pos < len(self.running):
            seq = self.running[pos]
            n = min(seq.num_tokens - seq.num_computed, budget)
            fits = self._try_alloc(seq, n)
            while not fits:
                if self._preempt_newest() is seq:
                    break  # it was the newest itself: pos is now past the end
                fits = self._try_alloc(seq, n)
            if fits:
                step.append((seq, n))
                budget -= n
                pos += 1

        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            n = min(seq.num_tokens - seq.num_computed, budget)
            if not self._try_alloc(seq, n):
                break  # FCFS: a smaller request behind it must not jump ahead
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            step.append((seq, n))
            budget -= n

        self._step = step
        return {seq.seq_id: n for seq, n in step}

    def update(self) -> list[Sequence]:
        step, self._step = self._step, []
        done: list[Sequence] = []
        for seq, n in step:
            seq.num_computed += n
            if seq.num_computed != seq.num_tokens:
                continue
            token = self.sample_fn(seq)
            seq.output.append(token)
            if token == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                seq.status = SequenceStatus.FINISHED
                self._drop_blocks(seq)
                self.finished.append(seq)
                done.append(seq)
        if done:
            # Compare to a member, never test truthiness: WAITING is 0.
            self.running = [s for s in self.running if s.status != SequenceStatus.FINISHED]
        return done
