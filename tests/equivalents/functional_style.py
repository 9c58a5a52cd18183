"""Equivalent: functools/itertools/operator style, the plan an immutable tuple of pairs.

This student reaches for the standard library's functional tools: the step's plan is a
tuple of `(seq_id, n)` tuples (immutable, so update() cannot be confused by the engine
touching the dict it was handed), preemption is an endless `iter(callable, sentinel)`
stream of victims consumed with `next(...)` until the sequence fits, the `{seq_id: seq}`
map is built with `attrgetter`, and update() is a `starmap` over the plan with a
`functools.partial` that returns the sequences that finished.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import itertools
from collections import deque
from collections.abc import Callable
from operator import attrgetter

seq_id_of = attrgetter("seq_id")


class SequenceStatus(enum.Enum):
    WAITING = enum.auto()
    RUNNING = enum.auto()
    FINISHED = enum.auto()


@dataclasses.dataclass(eq=False)  # identity equality: two requests are never "equal"
class Sequence:
    seq_id: str
    prompt_len: int
    max_tokens: int
    output: list[int] = dataclasses.field(default_factory=list, init=False)
    num_computed: int = dataclasses.field(default=0, init=False)
    num_blocks: int = dataclasses.field(default=0, init=False)
    status: SequenceStatus = dataclasses.field(default=SequenceStatus.WAITING, init=False)

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + len(self.output)

    @property
    def remaining(self) -> int:
        """Tokens without KV yet: the rest of the prompt, or 1 while decoding."""
        return self.num_tokens - self.num_computed


Plan = tuple[tuple[str, int], ...]


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
        self._plan: Plan = ()

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def _extra_blocks(self, seq: Sequence, n: int) -> int:
        """New blocks `seq` needs to hold num_computed + n tokens (never negative)."""
        held_after = (seq.num_computed + n + self.block_size - 1) // self.block_size
        return max(0, held_after - seq.num_blocks)

    def _take_blocks(self, seq: Sequence, n: int) -> bool:
        extra = self._extra_blocks(seq, n)
        if self.blocks_used + extra > self.num_blocks:
            return False
        self.blocks_used += extra
        seq.num_blocks += extra
        return True

    def _release(self, seq: Sequence) -> None:
        self.blocks_used -= seq.num_blocks
        seq.num_blocks = 0

    def _preempt_latest(self) -> Sequence:
        """Recompute-preempt running[-1] and return it: it keeps its output, loses its KV."""
        victim = self.running.pop()
        self._release(victim)
        victim.num_computed = 0
        victim.status = SequenceStatus.WAITING
        self.waiting.appendleft(victim)  # still older than anyone already waiting
        self.num_preemptions += 1
        return victim

    def schedule(self) -> dict[str, int]:
        budget = self.max_num_batched_tokens
        plan: Plan = ()

        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.remaining, budget)
            if not self._take_blocks(seq, n):
                # Keep evicting from the back until seq fits, or until seq was the victim.
                victims = iter(self._preempt_latest, None)
                last = next(v for v in victims if v is seq or self._take_blocks(seq, n))
                if last is seq:
                    continue  # index stays: running[i] is now the one after seq
            plan += ((seq.seq_id, n),)
            budget -= n
            i += 1

        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            head = self.waiting[0]
            n = min(head.remaining, budget)
            if not self._take_blocks(head, n):
                break  # FCFS: nobody may overtake the head
            self.waiting.popleft()
            head.status = SequenceStatus.RUNNING
            self.running.append(head)
            plan += ((head.seq_id, n),)
            budget -= n

        self._plan = plan
        return dict(plan)

    def _advance(self, by_id: dict[str, Sequence], seq_id: str, n: int) -> Sequence | None:
        """Apply one planned entry; return the sequence if it finished, else None."""
        seq = by_id[seq_id]
        seq.num_computed += n
        if seq.remaining:
            return None  # a prefill chunk that is not the last one
        token = self.sample_fn(seq)
        seq.output.append(token)
        if token != self.eos_token_id and len(seq.output) < seq.max_tokens:
            return None
        seq.status = SequenceStatus.FINISHED
        self._release(seq)
        self.finished.append(seq)
        return seq

    def update(self) -> list[Sequence]:
        plan, self._plan = self._plan, ()
        by_id = dict(zip(map(seq_id_of, self.running), self.running, strict=True))
        step = functools.partial(self._advance, by_id)
        done = [seq for seq in itertools.starmap(step, plan) if seq is not None]
        if done:
            self.running = [s for s in self.running if s.status is not SequenceStatus.FINISHED]
        return done
