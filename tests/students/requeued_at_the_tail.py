"""Bug: a preempted sequence goes back to the tail of `waiting`, "like any new request",
instead of its head: sequences that arrived after it are admitted before it.

Written functionally: module-level helpers take the scheduler as their first argument.
Caught by R1 or I6.
"""

from collections import deque
from enum import Enum


class SequenceStatus(Enum):
    WAITING = 10
    RUNNING = 20
    FINISHED = 30


class Sequence:
    def __init__(self, seq_id, prompt_len, max_tokens):
        self.seq_id = seq_id
        self.prompt_len = prompt_len
        self.max_tokens = max_tokens
        self.output = []
        self.num_computed = 0
        self.num_blocks = 0
        self.status = SequenceStatus.WAITING

    @property
    def num_tokens(self):
        return self.prompt_len + len(self.output)


def ceil_div(a, b):
    return (a + b - 1) // b


def grow(sched, seq, tokens):
    need = ceil_div(tokens, sched.block_size) - seq.num_blocks
    if sched.blocks_used + need > sched.num_blocks:
        return False
    if need > 0:
        sched.blocks_used += need
        seq.num_blocks += need
    return True


def give_back(sched, seq):
    sched.blocks_used -= seq.num_blocks
    seq.num_blocks = 0


def preempt(sched):
    victim = sched.running.pop()
    give_back(sched, victim)
    victim.num_computed = 0
    victim.status = SequenceStatus.WAITING
    sched.waiting.append(victim)  # back in the queue
    sched.num_preemptions += 1
    return victim


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
        self.record = {}

    def add(self, seq):
        self.waiting.append(seq)

    def schedule(self):
        budget = self.max_num_batched_tokens
        record = {}
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed, budget)
            while not grow(self, seq, seq.num_computed + n):
                if preempt(self) is seq:
                    break
            if seq.status is not SequenceStatus.RUNNING:
                break
            record[seq.seq_id] = n
            budget -= n
            i += 1
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            n = min(seq.num_tokens - seq.num_computed, budget)
            if not grow(self, seq, seq.num_computed + n):
                break
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            record[seq.seq_id] = n
            budget -= n
        self.record = record
        return dict(record)

    def update(self):
        record, self.record = self.record, {}
        by_id = {s.seq_id: s for s in self.running}
        finished = []
        for sid, n in record.items():
            seq = by_id[sid]
            seq.num_computed += n
            if seq.num_computed == seq.num_tokens:
                tok = self.sample_fn(seq)
                seq.output.append(tok)
                if tok == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                    finished.append(seq)
        for seq in finished:
            seq.status = SequenceStatus.FINISHED
            self.running.remove(seq)
            give_back(self, seq)
            self.finished.append(seq)
        return finished
