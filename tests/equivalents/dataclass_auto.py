"""Equivalent: Sequence is a @dataclass (field-wise __eq__, unhashable), statuses use enum.auto().

This student lets `dataclasses` write the boilerplate of the request record: the three
constructor arguments are ordinary fields, the runtime state fields are `init=False` so every
request starts from scratch, and `num_tokens` is a property. Because the generated `__eq__`
compares fields, the class is unhashable, so the scheduler never puts sequences in sets or
dict keys; finished sequences leave `running` through `list.remove`, which is safe because no
two sequences share a `seq_id`. Block counts are rounded up with `divmod`.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field


class SequenceStatus(enum.Enum):
    WAITING = enum.auto()
    RUNNING = enum.auto()
    FINISHED = enum.auto()


@dataclass
class Sequence:
    seq_id: str
    prompt_len: int
    max_tokens: int
    # Runtime state: not constructor arguments, the scheduler alone changes these.
    output: list[int] = field(default_factory=list, init=False)
    num_computed: int = field(default=0, init=False)
    num_blocks: int = field(default=0, init=False)
    status: SequenceStatus = field(default=SequenceStatus.WAITING, init=False)

    @property
    def num_tokens(self) -> int:
        # After a preemption this is exactly what must be recomputed.
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
        # update() takes no arguments, so the last plan lives here until it is consumed.
        self._plan: dict[str, int] = {}

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def _blocks_for(self, tokens: int) -> int:
        whole, rest = divmod(tokens, self.block_size)
        return whole + 1 if rest else whole

    def _reserve(self, seq: Sequence, tokens: int) -> bool:
        """Make `seq` hold blocks for `tokens` tokens; on failure nothing changes."""
        extra = self._blocks_for(tokens) - seq.num_blocks
        if self.blocks_used + extra > self.num_blocks:
            return False
        if extra > 0:
            seq.num_blocks += extra
            self.blocks_used += extra
        return True

    def _free_blocks(self, seq: Sequence) -> None:
        self.blocks_used -= seq.num_blocks
        seq.num_blocks = 0

    def _preempt_last(self) -> Sequence:
        """Recompute preemption of the latest admitted sequence: KV goes, output stays."""
        victim = self.running.pop()
        self._free_blocks(victim)
        victim.num_computed = 0
        victim.status = SequenceStatus.WAITING
        # It was admitted before anything still waiting, so it goes back to the front.
        self.waiting.appendleft(victim)
        self.num_preemptions += 1
        return victim

    def schedule(self) -> dict[str, int]:
        budget = self.max_num_batched_tokens
        plan: dict[str, int] = {}

        # Phase 1: running sequences in admission order. An index, not a for loop, because
        # preemption shortens the list under us.
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed, budget)
            lost_itself = False
            while not self._reserve(seq, seq.num_computed + n):
                if self._preempt_last() is seq:
                    lost_itself = True
                    break
            if lost_itself:
                continue  # running shrank: index i already points past the end
            plan[seq.seq_id] = n
            budget -= n
            i += 1

        # Phase 2: strict FCFS admission; a head that does not fit blocks everyone behind it.
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            head = self.waiting[0]
            n = min(head.num_tokens - head.num_computed, budget)
            if not self._reserve(head, head.num_computed + n):
                break
            self.waiting.popleft()
            head.status = SequenceStatus.RUNNING
            self.running.append(head)
            plan[head.seq_id] = n
            budget -= n

        self._plan = plan
        return dict(plan)

    def update(self) -> list[Sequence]:
        plan, self._plan = self._plan, {}
        # Look sequences up before the loop: finishing removes them from running.
        by_id = {seq.seq_id: seq for seq in self.running}
        done: list[Sequence] = []
        for seq_id, n in plan.items():
            seq = by_id[seq_id]
            seq.num_computed += n
            if seq.num_computed < seq.num_tokens:
                continue  # a prefill chunk that is not the last one samples nothing
            token = self.sample_fn(seq)
            seq.output.append(token)
            # Test after appending: the eos token is part of the output.
            if token == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                seq.status = SequenceStatus.FINISHED
                self.running.remove(seq)
                self._free_blocks(seq)
                self.finished.append(seq)
                done.append(seq)
        return done
