"""Bug: prefill and decode are two code paths: a sequence computes its prompt in chunks,
then one token a step. A preempted sequence that comes back with an output of two or more
tokens recomputes its prompt, then its output one token a step, where the spec computes
all `prompt_len + len(output)` tokens in chunks.

Written as a reserve/release pair of helpers and a `tokens_wanted` method.
Caught by R1.
"""

from collections import deque
from enum import Enum


class SequenceStatus(Enum):
    WAITING = "WAITING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"


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
        self._scheduled = {}

    def add(self, seq):
        self.waiting.append(seq)

    def blocks_for(self, tokens):
        return -(-tokens // self.block_size)

    def reserve(self, seq, tokens):
        need = self.blocks_for(tokens) - seq.num_blocks
        if self.blocks_used + need > self.num_blocks:
            return False
        if need > 0:
            self.blocks_used += need
            seq.num_blocks += need
        return True

    def release(self, seq):
        self.blocks_used -= seq.num_blocks
        seq.num_blocks = 0

    def tokens_wanted(self, seq, budget):
        if seq.num_computed < seq.prompt_len:
            return min(seq.prompt_len - seq.num_computed, budget)  # prefill, chunked
        return 1  # decode

    def schedule(self):
        budget = self.max_num_batched_tokens
        scheduled = {}
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = self.tokens_wanted(seq, budget)
            kept = True
            while not self.reserve(seq, seq.num_computed + n):
                victim = self.running.pop()
                self.release(victim)
                victim.num_computed = 0
                victim.status = SequenceStatus.WAITING
                self.waiting.appendleft(victim)
                self.num_preemptions += 1
                if victim is seq:
                    kept = False
                    break
            if not kept:
                break
            scheduled[seq.seq_id] = n
            budget -= n
            i += 1
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            n = self.tokens_wanted(seq, budget)
            if not self.reserve(seq, seq.num_computed + n):
                break
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            scheduled[seq.seq_id] = n
            budget -= n
        self._scheduled = scheduled
        return dict(scheduled)

    def update(self):
        scheduled, self._scheduled = self._scheduled, {}
        by_id = {s.seq_id: s for s in self.running}
        finished = []
        for sid, n in scheduled.items():
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
            self.release(seq)
            self.finished.append(seq)
        return finished
