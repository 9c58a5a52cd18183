"""Equivalent: both phases are `while True:` loops with explicit breaks; waiting is a list.

A student who finds loop conditions hard to read puts every exit test at the top of a
`while True:` body and leaves with `break`. The waiting queue is a plain Python list used
as a queue (head = index 0): `pop(0)` to admit, `insert(0, seq)` to put a preempted
sequence back in front. Finished sequences are removed from `running` right away with
`list.remove`, after looking up the scheduled ones by id first.
"""

from __future__ import annotations

import enum
from collections.abc import Callable


class SequenceStatus(enum.Enum):
    WAITING = enum.auto()
    RUNNING = enum.auto()
    FINISHED = enum.auto()


class Sequence:
    __slots__ = (
        "max_tokens",
        "num_blocks",
        "num_computed",
        "output",
        "prompt_len",
        "seq_id",
        "status",
    )

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
        self.waiting: list[Sequence] = []
        self.running: list[Sequence] = []
        self.finished: list[Sequence] = []
        self.blocks_used = 0
        self.num_preemptions = 0
        self.last_schedule: dict[str, int] = {}

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def _reserve(self, seq: Sequence, tokens: int) -> bool:
        """Grow seq's KV to hold `tokens` tokens; change nothing if it does not fit."""
        wanted = (tokens + self.block_size - 1) // self.block_size
        extra = wanted - seq.num_blocks
        if self.blocks_used + extra > self.num_blocks:
            return False
        if extra > 0:
            seq.num_blocks = wanted
            self.blocks_used += extra
        return True

    def _release(self, seq: Sequence) -> None:
        self.blocks_used -= seq.num_blocks
        seq.num_blocks = 0

    def schedule(self) -> dict[str, int]:
        budget = self.max_num_batched_tokens
        chosen: dict[str, int] = {}

        # Phase 1: the running sequences, by index because preemption shrinks the list.
        idx = 0
        while True:
            if idx >= len(self.running) or budget == 0:
                break
            seq = self.running[idx]
            n = min(seq.num_tokens - seq.num_computed, budget)
            evicted_self = False
            while True:
                if self._reserve(seq, seq.num_computed + n):
                    break
                # Recompute preemption of the latest admitted: it keeps its output.
                victim = self.running.pop()
                self._release(victim)
                victim.num_computed = 0
                victim.status = SequenceStatus.WAITING
                self.waiting.insert(0, victim)
                self.num_preemptions += 1
                if victim is seq:
                    evicted_self = True
                    break
            if evicted_self:
                # running[idx] is already the next sequence, so idx stays put.
                continue
            chosen[seq.seq_id] = n
            budget -= n
            idx += 1

        # Phase 2: admit from the head of waiting only; whoever does not fit blocks the rest.
        while True:
            if not self.waiting or budget == 0:
                break
            if len(self.running) >= self.max_num_seqs:
                break
            head = self.waiting[0]
            n = min(head.num_tokens - head.num_computed, budget)
            if not self._reserve(head, head.num_computed + n):
                break
            self.waiting.pop(0)
            head.status = SequenceStatus.RUNNING
            self.running.append(head)
            chosen[head.seq_id] = n
            budget -= n

        self.last_schedule = chosen
        return dict(chosen)

    def update(self) -> list[Sequence]:
        chosen = self.last_schedule
        self.last_schedule = {}
        # Look everyone up first: finishing removes sequences from running below.
        lookup = {seq.seq_id: seq for seq in self.running}
        done: list[Sequence] = []
        for seq_id, n in chosen.items():
            seq = lookup[seq_id]
            seq.num_computed += n
            if seq.num_computed != seq.num_tokens:
                continue  # still inside the prompt: nothing to sample yet
            tok = self.sample_fn(seq)
            seq.output.append(tok)
            if tok == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                seq.status = SequenceStatus.FINISHED
                self.running.remove(seq)
                self._release(seq)
                self.finished.append(seq)
                done.append(seq)
        return done
