"""The reference P07 scheduler: continuous batching, chunked prefill, recompute preemption.

Three budgets are charged at once (spec, "Three budgets"):
- tokens: `budget`, a local of `schedule()`, full again at every step (I2);
- running slots: `len(running) < max_num_seqs`, an admission condition of phase 2 only;
- KV blocks: `blocks_used` and every `seq.num_blocks`, always changed together (I1).

A step is `schedule()` (phase 1 over `running`, phase 2 over `waiting`) then `update()`.
Per-step cost is O(len(running) + admitted): nothing here scans `waiting` or `finished`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from schedcheck.scheduler.sequence import Sequence, SequenceStatus, require_positive_int


class Scheduler:
    """Decides, once per engine step, which sequences compute how many tokens."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        sample_fn: Callable[[Sequence], int],
        eos_token_id: int | None = None,
    ) -> None:
        self.num_blocks = require_positive_int("num_blocks", num_blocks)
        self.block_size = require_positive_int("block_size", block_size)
        self.max_num_seqs = require_positive_int("max_num_seqs", max_num_seqs)
        self.max_num_batched_tokens = require_positive_int(
            "max_num_batched_tokens", max_num_batched_tokens
        )
        if not callable(sample_fn):
            raise ValueError(f"sample_fn must be callable, got {sample_fn!r}")
        if eos_token_id is not None and type(eos_token_id) is not int:
            raise ValueError(f"eos_token_id must be an int or None, got {eos_token_id!r}")
        self.sample_fn = sample_fn
        self.eos_token_id = eos_token_id
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.finished: list[Sequence] = []
        self.blocks_used = 0
        self.num_preemptions = 0
        self._known_ids: set[str] = set()
        # What the last schedule() decided: update() takes no arguments (bug table).
        self._scheduled: dict[str, int] = {}

    # -- requests --------------------------------------------------------------------------

    def add(self, seq: Sequence) -> None:
        """Append a fresh, feasible request to the tail of `waiting` (I5: arrival order)."""
        if not isinstance(seq, Sequence):
            raise ValueError(f"seq must be a Sequence, got {seq!r}")
        if seq.seq_id in self._known_ids:
            raise ValueError(f"seq_id {seq.seq_id!r} was already added to this scheduler")
        for field, value, fresh in (
            ("status", seq.status, SequenceStatus.WAITING),
            ("output", seq.output, []),
            ("num_computed", seq.num_computed, 0),
            ("num_blocks", seq.num_blocks, 0),
        ):
            if value != fresh:
                raise ValueError(
                    f"seq {seq.seq_id!r} is not fresh: {field} is {value!r}, expected {fresh!r}"
                )
        # The most KV a sequence ever holds: its last sampled token is never computed.
        need = self._blocks_for(seq.prompt_len + seq.max_tokens - 1)
        if need > self.num_blocks:
            raise ValueError(
                f"seq {seq.seq_id!r} can never finish: prompt_len + max_tokens - 1 = "
                f"{seq.prompt_len + seq.max_tokens - 1} tokens need {need} KV blocks of "
                f"block_size {self.block_size}, and num_blocks is {self.num_blocks}"
            )
        self._known_ids.add(seq.seq_id)
        self.waiting.append(seq)

    # -- KV blocks (I1) ----------------------------------------------------------------------

    def _blocks_for(self, num_tokens: int) -> int:
        """Blocks that hold `num_tokens` tokens: ceil(num_tokens / block_size)."""
        return -(-num_tokens // self.block_size)

    def _try_grow(self, seq: Sequence, num_tokens: int) -> bool:
        """Give `seq` the blocks for `num_tokens` (= num_computed + n); all or nothing."""
        need = self._blocks_for(num_tokens) - seq.num_blocks
        if self.blocks_used + need > self.num_blocks:
            return False
        if need > 0:
            self.blocks_used += need
            seq.num_blocks += need
        return True

    def _free(self, seq: Sequence) -> None:
        self.blocks_used -= seq.num_blocks
        seq.num_blocks = 0

    def _preempt(self, seq: Sequence) -> None:
        """Recompute preemption of running[-1] (I4, I5): lose the KV, keep the output."""
        self.running.pop()
        self._free(seq)
        seq.num_computed = 0
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)
        self.num_preemptions += 1

    # -- one step ------------------------------------------------------------------------------

    def schedule(self) -> dict[str, int]:
        """Return `{seq_id: n}` for this step, in scheduling order; a copy (I2: sum <= budget)."""
        self._scheduled = {}
        budget = self._schedule_running(self.max_num_batched_tokens)
        self._schedule_waiting(budget)
        return dict(self._scheduled)

    def _schedule_running(self, budget: int) -> int:
        """Phase 1: running in order, by index, since preemption shortens the list."""
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed, budget)
            while not self._try_grow(seq, seq.num_computed + n):
                victim = self.running[-1]
                self._preempt(victim)
                if victim is seq:
                    break  # it preempted itself: running[i] is now the next one
            else:
                self._scheduled[seq.seq_id] = n
                budget -= n
                i += 1
        return budget

    def _schedule_waiting(self, budget: int) -> None:
        """Phase 2: strict FCFS on waiting[0]; the first that does not fit stops it."""
        while self._may_admit(budget):
            seq = self.waiting[0]
            n = min(seq.num_tokens - seq.num_computed, budget)
            if not self._try_grow(seq, seq.num_computed + n):
                break  # nobody behind it may jump the queue
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            self._scheduled[seq.seq_id] = n
            budget -= n

    def _may_admit(self, budget: int) -> bool:
        """Phase 2 goes on while someone waits, budget is left and a running slot is free:
        max_num_seqs is an admission condition of phase 2 only."""
        return bool(self.waiting) and budget > 0 and len(self.running) < self.max_num_seqs

    def update(self) -> list[Sequence]:
        """Advance what the last `schedule()` chose; sample where all tokens are computed (I3).

        Returns the sequences that finished, in scheduling order. Without a `schedule()`
        since the last `update()` it does nothing and returns [].
        """
        scheduled, self._scheduled = self._scheduled, {}
        if not scheduled:
            return []
        by_id = {seq.seq_id: seq for seq in self.running}
        done: list[Sequence] = []
        for seq_id, n in scheduled.items():
            seq = by_id[seq_id]
            seq.num_computed += n
            if seq.num_computed < seq.num_tokens:
                continue  # a prefill chunk that is not the last: no token yet
            token = self.sample_fn(seq)
            seq.output.append(token)
            if self._ends(seq, token):
                self._finish(seq)
                done.append(seq)
        if done:
            self.running[:] = [
                seq for seq in self.running if seq.status is not SequenceStatus.FINISHED
            ]
        return done

    def _ends(self, seq: Sequence, token: int) -> bool:
        """Tested after the append (bug table): eos is part of the output."""
        return token == self.eos_token_id or len(seq.output) >= seq.max_tokens

    def _finish(self, seq: Sequence) -> None:
        seq.status = SequenceStatus.FINISHED
        self._free(seq)
        self.finished.append(seq)
