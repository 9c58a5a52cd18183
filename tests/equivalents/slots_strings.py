"""Equivalent: a __slots__ Sequence with extra bookkeeping fields and helpers, string statuses.

This student keeps per-request facts on the request itself: `arrival_index` (stamped by
`add()`), `times_preempted`, and `last_chunk`, the token count granted by the latest
`schedule()`. The scheduler therefore remembers only which sequences it scheduled, in order,
and `update()` reads each one's `last_chunk`. `remaining()` and `blocks_needed()` put the
token and block arithmetic (rounded up with `math.ceil`) next to the data, and making room
for a running sequence is its own helper that reports whether the sequence lost its place.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from enum import Enum


class SequenceStatus(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class Sequence:
    __slots__ = (
        "arrival_index",
        "last_chunk",
        "max_tokens",
        "num_blocks",
        "num_computed",
        "output",
        "prompt_len",
        "seq_id",
        "status",
        "times_preempted",
    )

    def __init__(self, seq_id: str, prompt_len: int, max_tokens: int) -> None:
        self.seq_id = seq_id
        self.prompt_len = prompt_len
        self.max_tokens = max_tokens
        self.output: list[int] = []
        self.num_computed = 0
        self.num_blocks = 0
        self.status = SequenceStatus.WAITING
        self.arrival_index = -1  # set by Scheduler.add()
        self.times_preempted = 0
        self.last_chunk = 0

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + len(self.output)

    def remaining(self) -> int:
        """Tokens without KV yet: 1 while decoding, the rest of the prompt mid-prefill."""
        return self.num_tokens - self.num_computed

    def blocks_needed(self, block_size: int) -> int:
        """Blocks to hold what is computed plus the chunk just granted (not num_tokens)."""
        return math.ceil((self.num_computed + self.last_chunk) / block_size)

    def __repr__(self) -> str:
        return (
            f"<Sequence {self.seq_id} #{self.arrival_index} {self.status.value} "
            f"{self.num_computed}/{self.num_tokens} blocks={self.num_blocks} "
            f"preempted={self.times_preempted}x>"
        )


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
        self._arrivals = 0
        # Sequences picked by the last schedule(), in order; each carries its last_chunk.
        self._batch: list[Sequence] = []

    def add(self, seq: Sequence) -> None:
        seq.arrival_index = self._arrivals
        self._arrivals += 1
        self.waiting.append(seq)

    def _grant(self, seq: Sequence, chunk: int) -> bool:
        """Give `seq` the blocks for `chunk` more tokens; if they don't fit, hold no more."""
        seq.last_chunk = chunk
        extra = seq.blocks_needed(self.block_size) - seq.num_blocks
        if self.blocks_used + extra > self.num_blocks:
            return False
        if extra > 0:
            self.blocks_used += extra
            seq.num_blocks += extra
        return True

    def _release(self, seq: Sequence) -> None:
        self.blocks_used -= seq.num_blocks
        seq.num_blocks = 0

    def _evict(self, seq: Sequence) -> None:
        """Recompute preemption: drop the KV, keep every generated token."""
        self._release(seq)
        seq.num_computed = 0
        seq.status = SequenceStatus.WAITING
        seq.times_preempted += 1
        self.waiting.appendleft(seq)  # older than anything waiting: it goes first
        self.num_preemptions += 1

    def _make_room(self, seq: Sequence, chunk: int) -> bool:
        """Preempt from the tail of running until `seq` fits; False if `seq` itself went."""
        while not self._grant(seq, chunk):
            victim = self.running.pop()
            self._evict(victim)
            if victim is seq:
                return False
        return True

    def schedule(self) -> dict[str, int]:
        budget = self.max_num_batched_tokens
        batch: list[Sequence] = []

        # Running first. The list can shrink while we walk it, so walk it by index.
        idx = 0
        while idx < len(self.running) and budget > 0:
            seq = self.running[idx]
            chunk = min(seq.remaining(), budget)
            if not self._make_room(seq, chunk):
                continue  # it was the last one, so the walk is over
            batch.append(seq)
            budget -= chunk
            idx += 1

        # Then admit from the front of waiting only (FCFS, no overtaking).
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            chunk = min(seq.remaining(), budget)
            if not self._grant(seq, chunk):
                break
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            batch.append(seq)
            budget -= chunk

        self._batch = batch
        return {seq.seq_id: seq.last_chunk for seq in batch}

    def update(self) -> list[Sequence]:
        batch, self._batch = self._batch, []
        done: list[Sequence] = []
        for seq in batch:
            seq.num_computed += seq.last_chunk
            if seq.remaining() > 0:
                continue  # prefill still in progress: nothing to sample yet
            token = self.sample_fn(seq)
            seq.output.append(token)
            if token == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                seq.status = SequenceStatus.FINISHED
                self._release(seq)
                self.finished.append(seq)
                done.append(seq)
        if done:
            gone = {id(seq) for seq in done}
            self.running = [seq for seq in self.running if id(seq) not in gone]
        return done
