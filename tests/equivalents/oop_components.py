"""Equivalent: the scheduler is composed of a BlockPool, a StepBudget and small helpers.

A student fresh from an OOP course splits the three budgets into objects: `BlockPool` owns
the KV counters and does all allocation and freeing, `StepBudget` is the per-step token
allowance, and phase 1 signals "this sequence preempted itself" by raising a private
exception that the loop catches. Free functions do the arithmetic. The `Scheduler` still
exposes the contract's attributes: `blocks_used` is a property that asks the pool.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def tokens_left(seq: Sequence) -> int:
    """Tokens without KV yet: the rest of the prompt, or 1 when decoding."""
    return seq.num_tokens - seq.num_computed


def should_stop(seq: Sequence, token: int, eos_token_id: int | None) -> bool:
    # Called after the token was appended: eos belongs to the output.
    return token == eos_token_id or len(seq.output) >= seq.max_tokens


class SequenceStatus(enum.Enum):
    WAITING = "W"
    RUNNING = "R"
    FINISHED = "F"


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


class BlockPool:
    """A fixed number of KV blocks; tracks the total in use and each sequence's share."""

    def __init__(self, capacity: int, block_size: int) -> None:
        self.capacity = capacity
        self.block_size = block_size
        self.used = 0

    @property
    def free(self) -> int:
        return self.capacity - self.used

    def allocate(self, seq: Sequence, tokens: int) -> bool:
        """Make seq hold enough blocks for `tokens` tokens; on failure nothing changes."""
        missing = ceil_div(tokens, self.block_size) - seq.num_blocks
        if missing > self.free:
            return False
        if missing > 0:
            self.used += missing
            seq.num_blocks += missing
        return True

    def release(self, seq: Sequence) -> None:
        self.used -= seq.num_blocks
        seq.num_blocks = 0


class StepBudget:
    """The tokens one step may still compute; a fresh one is made per schedule()."""

    def __init__(self, tokens: int) -> None:
        self.remaining = tokens

    @property
    def exhausted(self) -> bool:
        return self.remaining == 0

    def grant(self, wanted: int) -> int:
        return min(wanted, self.remaining)

    def spend(self, n: int) -> None:
        self.remaining -= n


class _PreemptedItself(Exception):
    """Phase 1 only: the sequence being placed was the newest, so it was preempted."""


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
        self.pool = BlockPool(num_blocks, block_size)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.finished: list[Sequence] = []
        self.num_preemptions = 0
        self._plan: list[tuple[Sequence, int]] = []

    @property
    def blocks_used(self) -> int:
        return self.pool.used

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def _preempt_newest(self) -> Sequence:
        seq = self.running.pop()
        self.pool.release(seq)
        seq.num_computed = 0
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)
        self.num_preemptions += 1
        return seq

    def _secure_blocks(self, seq: Sequence, n: int) -> None:
        """Preempt from the back of running until seq's next n tokens fit."""
        while not self.pool.allocate(seq, seq.num_computed + n):
            if self._preempt_newest() is seq:
                raise _PreemptedItself

    def _continue_running(self, budget: StepBudget) -> None:
        i = 0
        while i < len(self.running) and not budget.exhausted:
            seq = self.running[i]
            n = budget.grant(tokens_left(seq))
            try:
                self._secure_blocks(seq, n)
            except _PreemptedItself:
                continue  # running[i] is now whoever came after it
            self._plan.append((seq, n))
            budget.spend(n)
            i += 1

    def _admit_waiting(self, budget: StepBudget) -> None:
        while self.waiting and not budget.exhausted and len(self.running) < self.max_num_seqs:
            head = self.waiting[0]
            n = budget.grant(tokens_left(head))
            if not self.pool.allocate(head, head.num_computed + n):
                return  # strict FCFS: the head blocks everyone behind it
            self.waiting.popleft()
            head.status = SequenceStatus.RUNNING
            self.running.append(head)
            self._plan.append((head, n))
            budget.spend(n)

    def schedule(self) -> dict[str, int]:
        self._plan = []
        budget = StepBudget(self.max_num_batched_tokens)
        self._continue_running(budget)
        self._admit_waiting(budget)
        return {seq.seq_id: n for seq, n in self._plan}

    def update(self) -> list[Sequence]:
        plan, self._plan = self._plan, []
        done = []
        for seq, n in plan:
            seq.num_computed += n
            if seq.num_computed < seq.num_tokens:
                continue
            token = self.sample_fn(seq)
            seq.output.append(token)
            if should_stop(seq, token, self.eos_token_id):
                self._retire(seq)
                done.append(seq)
        return done

    def _retire(self, seq: Sequence) -> None:
        seq.status = SequenceStatus.FINISHED
        self.running.remove(seq)
        self.pool.release(seq)
        self.finished.append(seq)
