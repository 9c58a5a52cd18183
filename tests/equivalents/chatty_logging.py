"""Equivalent: prints one line per schedule()/update(), logs at DEBUG, keeps a history.

A student who debugs with print statements and never took them out: every `schedule()`
and every `update()` prints one short summary line, and the finer details go to a
module logger at DEBUG level that nobody configures, so it stays silent. Past schedules
are kept in `history`. In phase 1 a self-preemption is noticed by the sequence's status
having gone back to WAITING rather than by a flag.
"""

from __future__ import annotations

import enum
import logging
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)

_SHOWN = 4  # how many entries a printed summary lists before "+k more"


def _summary(ids: list[str]) -> str:
    if not ids:
        return "-"
    more = f" +{len(ids) - _SHOWN} more" if len(ids) > _SHOWN else ""
    return ",".join(ids[:_SHOWN]) + more


class SequenceStatus(enum.Enum):
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

    def __repr__(self) -> str:
        return f"<{self.seq_id} {self.status.name} {self.num_computed}/{self.num_tokens}>"


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
        self.history: list[dict[str, int]] = []  # every schedule so far, oldest first
        self.current: dict[str, int] = {}  # the last schedule, until update() consumes it

    def add(self, seq: Sequence) -> None:
        log.debug("add %r", seq)
        self.waiting.append(seq)

    def _blocks_needed(self, seq: Sequence, n: int) -> int:
        held_after = seq.num_computed + n
        return -(-held_after // self.block_size) - seq.num_blocks

    def _try_allocate(self, seq: Sequence, n: int) -> bool:
        extra = self._blocks_needed(seq, n)
        if self.blocks_used + extra > self.num_blocks:
            log.debug("%r needs %d more blocks, %d used", seq, extra, self.blocks_used)
            return False
        if extra > 0:
            self.blocks_used += extra
            seq.num_blocks += extra
        return True

    def _drop_blocks(self, seq: Sequence) -> None:
        self.blocks_used -= seq.num_blocks
        seq.num_blocks = 0

    def _preempt_newest(self) -> Sequence:
        victim = self.running.pop()
        self._drop_blocks(victim)
        victim.num_computed = 0  # its KV is gone: it must recompute, output is kept
        victim.status = SequenceStatus.WAITING
        self.waiting.appendleft(victim)
        self.num_preemptions += 1
        log.debug("preempted %r", victim)
        return victim

    def schedule(self) -> dict[str, int]:
        plan: dict[str, int] = {}
        preempted: list[str] = []
        budget = self.max_num_batched_tokens

        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed, budget)
            while seq.status is SequenceStatus.RUNNING and not self._try_allocate(seq, n):
                preempted.append(self._preempt_newest().seq_id)
            if seq.status is SequenceStatus.WAITING:
                continue  # it was the newest itself; the list is shorter, i stays
            plan[seq.seq_id] = n
            budget -= n
            i += 1

        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            n = min(seq.num_tokens - seq.num_computed, budget)
            if not self._try_allocate(seq, n):
                break  # FCFS: do not let a smaller request overtake the head
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            plan[seq.seq_id] = n
            budget -= n
            log.debug("admitted %r with %d tokens", seq, n)

        self.current = plan
        self.history.append(dict(plan))
        step = len(self.history)
        ran = _summary([f"{k}:{v}" for k, v in plan.items()])
        print(
            f"[sched {step}] ran {ran} | preempted {_summary(preempted)}"
            f" | waiting {len(self.waiting)}"
        )
        return dict(plan)

    def update(self) -> list[Sequence]:
        plan, self.current = self.current, {}
        by_id = {seq.seq_id: seq for seq in self.running}
        finished_now: list[Sequence] = []
        for seq_id, n in plan.items():
            seq = by_id[seq_id]
            seq.num_computed += n
            if seq.num_computed == seq.num_tokens:
                tok = self.sample_fn(seq)
                seq.output.append(tok)
                log.debug("%s sampled %d", seq_id, tok)
                if tok == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                    seq.status = SequenceStatus.FINISHED
                    self._drop_blocks(seq)
                    self.finished.append(seq)
                    finished_now.append(seq)
        for seq in finished_now:
            self.running.remove(seq)
        print(
            f"[update {len(self.history)}] finished {_summary([s.seq_id for s in finished_now])}"
            f" | running {len(self.running)} | blocks {self.blocks_used}/{self.num_blocks}"
        )
        return finished_now
