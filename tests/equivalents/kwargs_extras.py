"""Equivalent: extra optional constructor knobs, value-style Sequence, full typing.

This student anticipated an engine around the scheduler: `Sequence` also takes `priority`
and `arrival_time`, `Scheduler` takes `enable_chunked_prefill` and `debug`; with their
defaults none of them changes a decision. `Sequence` compares and hashes by `seq_id` (ids
are unique within a scheduler), so update() drops finished sequences from `running` with
a set. Phase 1 preempts others from the back while the current sequence is not last, and
only then gives up the current one itself. Everything is annotated.
"""

from __future__ import annotations

import enum
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Final, TypeAlias

logger: Final = logging.getLogger(__name__)


class SequenceStatus(enum.Enum):
    WAITING = "WAITING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"


class Sequence:
    def __init__(
        self,
        seq_id: str,
        prompt_len: int,
        max_tokens: int,
        priority: int = 0,
        arrival_time: float | None = None,
    ) -> None:
        self.seq_id: str = seq_id
        self.prompt_len: int = prompt_len
        self.max_tokens: int = max_tokens
        # Metadata for the engine's metrics; this scheduler is strict FCFS and ignores it.
        self.priority: int = priority
        self.arrival_time: float = time.monotonic() if arrival_time is None else arrival_time
        self.output: list[int] = []
        self.num_computed: int = 0
        self.num_blocks: int = 0
        self.status: SequenceStatus = SequenceStatus.WAITING

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + len(self.output)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return self.seq_id == other.seq_id

    def __hash__(self) -> int:
        return hash(self.seq_id)

    def __repr__(self) -> str:
        return (
            f"Sequence(seq_id={self.seq_id!r}, status={self.status.name}, "
            f"computed={self.num_computed}/{self.num_tokens}, blocks={self.num_blocks}, "
            f"output={self.output!r})"
        )


SampleFn: TypeAlias = Callable[[Sequence], int]
ScheduleRecord: TypeAlias = dict[str, int]


class Scheduler:
    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        sample_fn: SampleFn,
        eos_token_id: int | None = None,
        enable_chunked_prefill: bool = True,
        debug: bool = False,
    ) -> None:
        self.num_blocks: int = num_blocks
        self.block_size: int = block_size
        self.max_num_seqs: int = max_num_seqs
        self.max_num_batched_tokens: int = max_num_batched_tokens
        self.sample_fn: SampleFn = sample_fn
        self.eos_token_id: int | None = eos_token_id
        self.enable_chunked_prefill: bool = enable_chunked_prefill
        self.debug: bool = debug
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.finished: list[Sequence] = []
        self.blocks_used: int = 0
        self.num_preemptions: int = 0
        self._last_schedule: ScheduleRecord = {}

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    # -- KV block accounting: blocks_used and seq.num_blocks always move together --

    def _blocks_needed(self, seq: Sequence, n: int) -> int:
        """Additional blocks for seq to hold its computed tokens plus n more."""
        total = (seq.num_computed + n + self.block_size - 1) // self.block_size
        return max(total - seq.num_blocks, 0)

    def _can_allocate(self, seq: Sequence, n: int) -> bool:
        return self.blocks_used + self._blocks_needed(seq, n) <= self.num_blocks

    def _allocate(self, seq: Sequence, n: int) -> None:
        extra = self._blocks_needed(seq, n)
        seq.num_blocks += extra
        self.blocks_used += extra

    def _free_blocks(self, seq: Sequence) -> None:
        self.blocks_used -= seq.num_blocks
        seq.num_blocks = 0

    def _preempt(self, seq: Sequence) -> None:
        """Recompute preemption: drop the KV and progress counter, keep the output."""
        self.running.remove(seq)
        self._free_blocks(seq)
        seq.num_computed = 0
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)
        self.num_preemptions += 1
        if self.debug:
            logger.debug("preempted %r", seq)

    def _chunk(self, seq: Sequence, budget: int) -> int:
        return min(seq.num_tokens - seq.num_computed, budget)

    # -- one engine step --

    def schedule(self) -> dict[str, int]:
        record: ScheduleRecord = {}
        budget: int = self.max_num_batched_tokens

        # Phase 1: running sequences in admission order.
        pos = 0
        while pos < len(self.running) and budget > 0:
            seq = self.running[pos]
            n = self._chunk(seq, budget)
            # Make room by preempting whoever was admitted last, as long as that is not seq.
            while not self._can_allocate(seq, n) and self.running[-1] is not seq:
                self._preempt(self.running[-1])
            if not self._can_allocate(seq, n):
                # seq is the latest admitted now, so it is the one to give up its blocks.
                self._preempt(seq)
                continue
            self._allocate(seq, n)
            record[seq.seq_id] = n
            budget -= n
            pos += 1

        # Phase 2: admit from the head of waiting only (strict FCFS).
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            n = self._chunk(seq, budget)
            if not self.enable_chunked_prefill and n < seq.num_tokens - seq.num_computed:
                break  # without chunking a prefill waits until it fits in one go
            if not self._can_allocate(seq, n):
                break
            self._allocate(seq, n)
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            record[seq.seq_id] = n
            budget -= n

        if self.debug:
            logger.debug("schedule: %s, blocks %d/%d", record, self.blocks_used, self.num_blocks)
        self._last_schedule = record
        return record.copy()  # the caller may consume its copy; update() keeps ours

    def update(self) -> list[Sequence]:
        record, self._last_schedule = self._last_schedule, {}
        lookup: dict[str, Sequence] = {seq.seq_id: seq for seq in self.running}
        just_finished: list[Sequence] = []
        for seq_id, n in record.items():
            seq = lookup[seq_id]
            seq.num_computed += n
            if seq.num_computed < seq.num_tokens:
                continue  # still in the middle of its prefill
            token = self.sample_fn(seq)
            seq.output.append(token)
            # eos counts as output, so test after appending
            if token == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                seq.status = SequenceStatus.FINISHED
                self._free_blocks(seq)
                self.finished.append(seq)
                just_finished.append(seq)
        if just_finished:
            gone = set(just_finished)
            self.running = [seq for seq in self.running if seq not in gone]
        return just_finished
