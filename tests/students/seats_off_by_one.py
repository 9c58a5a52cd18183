"""Bug: phase 2 admits while `len(running) <= max_num_seqs` (`<=` where `<` is meant): one
sequence more than there are running slots.

Written with the admission test in a property named for what it means. Caught by I8.
"""

from collections import deque
from enum import Enum


class SequenceStatus(Enum):
    WAITING = 1
    RUNNING = 2
    FINISHED = 3


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
        self.plan = {}

    @property
    def has_free_slot(self):
        return len(self.running) <= self.max_num_seqs

    def add(self, seq):
        self.waiting.append(seq)

    def fit(self, seq, n):
        need = (seq.num_computed + n + self.block_size - 1) // self.block_size - seq.num_blocks
        if self.blocks_used + need > self.num_blocks:
            return False
        if need > 0:
            self.blocks_used += need
            seq.num_blocks += need
        return True

    def schedule(self):
        budget = self.max_num_batched_tokens
        plan = {}
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed, budget)
            gave_up = False
            while not self.fit(seq, n):
                victim = self.running.pop()
                self.blocks_used -= victim.num_blocks
                victim.num_blocks = 0
                victim.num_computed = 0
                victim.status = SequenceStatus.WAITING
                self.waiting.appendleft(victim)
                self.num_preemptions += 1
                if victim is seq:
                    gave_up = True
                    break
            if gave_up:
                break
            plan[seq.seq_id] = n
            budget -= n
            i += 1
        while self.waiting and budget > 0 and self.has_free_slot:
            seq = self.waiting[0]
            n = min(seq.num_tokens - seq.num_computed, budget)
            if not self.fit(seq, n):
                break
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            plan[seq.seq_id] = n
            budget -= n
        self.plan = plan
        return dict(plan)

    def update(self):
        plan, self.plan = self.plan, {}
        seqs = {s.seq_id: s for s in self.running}
        finished = []
        for sid, n in plan.items():
            seq = seqs[sid]
            seq.num_computed += n
            if seq.num_computed == seq.num_tokens:
                tok = self.sample_fn(seq)
                seq.output.append(tok)
                if tok == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                    finished.append(seq)
        for seq in finished:
            seq.status = SequenceStatus.FINISHED
            self.running.remove(seq)
            self.blocks_used -= seq.num_blocks
            seq.num_blocks = 0
            self.finished.append(seq)
        return finished
