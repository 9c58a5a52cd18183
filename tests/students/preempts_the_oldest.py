"""Bug: the victim of a preemption is the oldest running sequence, `running[0]`, not the
last admitted one: "the one that has run longest has had its turn".

Written with dataclasses and a free function for the block arithmetic. The index of phase 1
is moved back when the victim was in front of it, so nothing is skipped: the only bug is
whom it takes. Caught by F1 or R1.
"""

import math
from collections import deque
from dataclasses import dataclass, field
from enum import Enum, auto


class SequenceStatus(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


@dataclass(eq=False)
class Sequence:
    seq_id: str
    prompt_len: int
    max_tokens: int
    output: list = field(default_factory=list)
    num_computed: int = 0
    num_blocks: int = 0
    status: SequenceStatus = SequenceStatus.WAITING

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + len(self.output)


def blocks_needed(tokens: int, block_size: int) -> int:
    return math.ceil(tokens / block_size)


class Scheduler:
    def __init__(self, num_blocks, block_size, max_num_seqs, max_num_batched_tokens,
                 sample_fn, eos_token_id=None):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.sample_fn = sample_fn
        self.eos_token_id = eos_token_id
        self.waiting = deque()
        self.running = []
        self.finished = []
        self.blocks_used = 0
        self.num_preemptions = 0
        self.scheduled = {}

    def add(self, seq):
        self.waiting.append(seq)

    def try_grow(self, seq, tokens):
        need = blocks_needed(tokens, self.block_size) - seq.num_blocks
        if self.blocks_used + need > self.num_blocks:
            return False
        if need > 0:
            self.blocks_used += need
            seq.num_blocks += need
        return True

    def preempt(self, index):
        victim = self.running.pop(index)
        self.blocks_used -= victim.num_blocks
        victim.num_blocks = 0
        victim.num_computed = 0
        victim.status = SequenceStatus.WAITING
        self.waiting.appendleft(victim)
        self.num_preemptions += 1
        return victim

    def schedule(self):
        budget = self.max_num_batched_tokens
        scheduled = {}
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed, budget)
            ok = True
            while not self.try_grow(seq, seq.num_computed + n):
                victim = self.preempt(0)  # the oldest has had its turn
                if victim is seq:
                    ok = False
                    break
                i -= 1  # everything after the victim moved one to the left
                scheduled.pop(victim.seq_id, None)
                budget = self.max_num_batched_tokens - sum(scheduled.values())
                n = min(seq.num_tokens - seq.num_computed, budget)
            if ok:
                scheduled[seq.seq_id] = n
                budget -= n
                i += 1
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            n = min(seq.num_tokens - seq.num_computed, budget)
            if not self.try_grow(seq, seq.num_computed + n):
                break
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            scheduled[seq.seq_id] = n
            budget -= n
        self.scheduled = scheduled
        return dict(scheduled)

    def update(self):
        scheduled, self.scheduled = self.scheduled, {}
        lookup = {s.seq_id: s for s in self.running}
        done = []
        for seq_id, n in scheduled.items():
            seq = lookup[seq_id]
            seq.num_computed += n
            if seq.num_computed == seq.num_tokens:
                token = self.sample_fn(seq)
                seq.output.append(token)
                if token == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                    seq.status = SequenceStatus.FINISHED
                    done.append(seq)
        for seq in done:
            self.running.remove(seq)
            self.blocks_used -= seq.num_blocks
            seq.num_blocks = 0
            self.finished.append(seq)
        return done
