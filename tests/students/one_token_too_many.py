"""Bug: a sequence ends only once it has more than `max_tokens` tokens (`>` where `>=` is
meant): every sequence not ended by eos generates one token too many.

Written compactly, a single class with the phases inline. Caught by A1 or R1.
"""

from collections import deque
from enum import Enum


class SequenceStatus(Enum):
    WAITING = 1
    RUNNING = 2
    FINISHED = 3


class Sequence:
    def __init__(self, seq_id, prompt_len, max_tokens):
        self.seq_id, self.prompt_len, self.max_tokens = seq_id, prompt_len, max_tokens
        self.output, self.num_computed, self.num_blocks = [], 0, 0
        self.status = SequenceStatus.WAITING

    @property
    def num_tokens(self):
        return self.prompt_len + len(self.output)


class Scheduler:
    def __init__(self, num_blocks, block_size, max_num_seqs, max_num_batched_tokens,
                 sample_fn, eos_token_id=None):
        self.num_blocks, self.block_size = num_blocks, block_size
        self.max_num_seqs, self.max_num_batched_tokens = max_num_seqs, max_num_batched_tokens
        self.sample_fn, self.eos_token_id = sample_fn, eos_token_id
        self.waiting, self.running, self.finished = deque(), [], []
        self.blocks_used, self.num_preemptions = 0, 0
        self._sched = {}

    def add(self, seq):
        self.waiting.append(seq)

    def _grow(self, s, k):
        need = -(-k // self.block_size) - s.num_blocks
        if self.blocks_used + need > self.num_blocks:
            return False
        if need > 0:
            s.num_blocks += need
            self.blocks_used += need
        return True

    def schedule(self):
        budget, out, i = self.max_num_batched_tokens, {}, 0
        while i < len(self.running) and budget > 0:
            s = self.running[i]
            n = min(s.num_tokens - s.num_computed, budget)
            self_preempted = False
            while not self._grow(s, s.num_computed + n):
                v = self.running.pop()
                self.blocks_used -= v.num_blocks
                v.num_blocks, v.num_computed = 0, 0
                v.status = SequenceStatus.WAITING
                self.waiting.appendleft(v)
                self.num_preemptions += 1
                if v is s:
                    self_preempted = True
                    break
            if self_preempted:
                break
            out[s.seq_id] = n
            budget -= n
            i += 1
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            s = self.waiting[0]
            n = min(s.num_tokens - s.num_computed, budget)
            if not self._grow(s, s.num_computed + n):
                break
            self.running.append(self.waiting.popleft())
            s.status = SequenceStatus.RUNNING
            out[s.seq_id] = n
            budget -= n
        self._sched = out
        return dict(out)

    def update(self):
        sched, self._sched = self._sched, {}
        seqs = {s.seq_id: s for s in self.running}
        done = []
        for sid, n in sched.items():
            s = seqs[sid]
            s.num_computed += n
            if s.num_computed == s.num_tokens:
                t = self.sample_fn(s)
                s.output.append(t)
                if t == self.eos_token_id or len(s.output) > s.max_tokens:
                    done.append(s)
        for s in done:
            s.status = SequenceStatus.FINISHED
            self.running.remove(s)
            self.blocks_used -= s.num_blocks
            s.num_blocks = 0
            self.finished.append(s)
        return done
