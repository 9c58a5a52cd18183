"""Equivalent: tuple-valued status members compared with `is`, growth reported as a count.

This student gives every `SequenceStatus` member a `(label, rank)` tuple as its value and
only ever compares statuses by identity, which is what enum members guarantee. Growing a
sequence's KV returns how many new blocks it took (0 is a fine answer) or None when they do
not fit, so callers test `is None`. update() first marks sequences FINISHED while it walks
the plan, then finds them again by status and rebuilds `running` with a comprehension.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from enum import Enum


class SequenceStatus(Enum):
    WAITING = ("waiting", 0)
    RUNNING = ("running", 1)
    FINISHED = ("finished", 2)

    @property
    def label(self) -> str:
        return self.value[0]


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

    def __repr__(self) -> str:
        return f"<{self.seq_id} {self.status.label} {self.num_computed}/{self.num_tokens}>"


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
        self._plan: dict[str, int] = {}

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def _try_grow(self, seq: Sequence, target_tokens: int) -> int | None:
        """Grow seq's KV to hold target_tokens; the number of new blocks, or None if full."""
        wanted = -(-target_tokens // self.block_size)
        new_blocks = max(wanted - seq.num_blocks, 0)
        if self.blocks_used + new_blocks > self.num_blocks:
            return None  # all or nothing: no counter was touched
        seq.num_blocks += new_blocks
        self.blocks_used += new_blocks
        return new_blocks

    def _give_back_blocks(self, seq: Sequence) -> None:
        self.blocks_used -= seq.num_blocks
        seq.num_blocks = 0

    def _evict(self, seq: Sequence) -> None:
        """seq was just popped off running: send it back to recompute from scratch."""
        self._give_back_blocks(seq)
        seq.num_computed = 0  # its output stays; the KV for it is what got lost
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)
        self.num_preemptions += 1

    def schedule(self) -> dict[str, int]:
        plan: dict[str, int] = {}
        budget = self.max_num_batched_tokens

        idx = 0
        while idx < len(self.running) and budget > 0:
            seq = self.running[idx]
            n = min(seq.num_tokens - seq.num_computed, budget)
            grown = self._try_grow(seq, seq.num_computed + n)
            while grown is None:
                victim = self.running.pop()
                self._evict(victim)
                if victim is seq:
                    break
                grown = self._try_grow(seq, seq.num_computed + n)
            if grown is None:
                continue  # seq evicted itself; the next one slid into running[idx]
            plan[seq.seq_id] = n
            budget -= n
            idx += 1

        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            head = self.waiting[0]
            n = min(head.num_tokens - head.num_computed, budget)
            if self._try_grow(head, head.num_computed + n) is None:
                break  # the head blocks the line: no overtaking
            self.waiting.popleft()
            head.status = SequenceStatus.RUNNING
            self.running.append(head)
            plan[head.seq_id] = n
            budget -= n

        self._plan = plan
        return dict(plan)

    def update(self) -> list[Sequence]:
        plan, self._plan = self._plan, {}
        members = {seq.seq_id: seq for seq in self.running}
        for seq_id, n in plan.items():
            seq = members[seq_id]
            seq.num_computed += n
            if seq.num_computed != seq.num_tokens:
                continue  # only the last prefill chunk (or a decode) samples
            token = self.sample_fn(seq)
            seq.output.append(token)
            if token == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                seq.status = SequenceStatus.FINISHED
                self._give_back_blocks(seq)

        ended = [
            members[seq_id] for seq_id in plan if members[seq_id].status is SequenceStatus.FINISHED
        ]
        self.finished.extend(ended)
        self.running = [seq for seq in self.running if seq.status is not SequenceStatus.FINISHED]
        return ended
