"""Bug: a waiting sequence is admitted only when all it has left fits in the budget: the
student read "chunked prefill" as something only running sequences do, so a prompt longer
than what is left of the budget waits, where the spec admits its first chunk.

Written in a while-True style with early breaks. Caught by R1.
"""

from collections import deque
from enum import Enum


class SequenceStatus(Enum):
    WAITING = "W"
    RUNNING = "R"
    FINISHED = "F"


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
        self.pending = {}

    def add(self, seq):
        self.waiting.append(seq)

    def grow(self, seq, upto):
        want = (upto + self.block_size - 1) // self.block_size
        need = want - seq.num_blocks
        if self.blocks_used + need > self.num_blocks:
            return False
        if need > 0:
            self.blocks_used += need
            seq.num_blocks = want
        return True

    def schedule(self):
        budget = self.max_num_batched_tokens
        sched = {}
        i = 0
        while True:
            if i >= len(self.running) or budget <= 0:
                break
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed, budget)
            lost = False
            while not self.grow(seq, seq.num_computed + n):
                victim = self.running.pop()
                self.blocks_used -= victim.num_blocks
                victim.num_blocks = 0
                victim.num_computed = 0
                victim.status = SequenceStatus.WAITING
                self.waiting.appendleft(victim)
                self.num_preemptions += 1
                if victim is seq:
                    lost = True
                    break
            if lost:
                break
            sched[seq.seq_id] = n
            budget -= n
            i += 1
        while True:
            if not self.waiting or budget <= 0 or len(self.running) >= self.max_num_seqs:
                break
            seq = self.waiting[0]
            left = seq.num_tokens - seq.num_computed
            if left > budget:
                break  # wait until the whole prompt fits in one step
            if not self.grow(seq, seq.num_computed + left):
                break
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            sched[seq.seq_id] = left
            budget -= left
        self.pending = sched
        return dict(sched)

    def update(self):
        pending, self.pending = self.pending, {}
        index = {s.seq_id: s for s in self.running}
        out = []
        for sid, n in pending.items():
            seq = index[sid]
            seq.num_computed += n
            if seq.num_computed != seq.num_tokens:
                continue
            tok = self.sample_fn(seq)
            seq.output.append(tok)
            if tok == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                seq.status = SequenceStatus.FINISHED
                out.append(seq)
        for seq in out:
            self.running.remove(seq)
            self.blocks_used -= seq.num_blocks
            seq.num_blocks = 0
            self.finished.append(seq)
        return out
