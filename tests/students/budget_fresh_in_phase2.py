"""Bug: admission (phase 2) lives in a method of its own, which starts from a full token
budget instead of what phase 1 left: a step computes more tokens than
`max_num_batched_tokens`.

Written in small methods, one per phase, each returning its part of the schedule.
Caught by I2 or R1.
"""

from collections import deque
from enum import Enum


class SequenceStatus(Enum):
    WAITING = 0
    RUNNING = 1
    FINISHED = 2


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

    def remaining(self):
        return self.num_tokens - self.num_computed


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
        self._last = {}

    def add(self, seq):
        self.waiting.append(seq)

    def _fits(self, seq, n):
        need = -(-(seq.num_computed + n) // self.block_size) - seq.num_blocks
        if self.blocks_used + need > self.num_blocks:
            return False
        if need > 0:
            seq.num_blocks += need
            self.blocks_used += need
        return True

    def _preempt(self):
        v = self.running.pop()
        self.blocks_used -= v.num_blocks
        v.num_blocks = 0
        v.num_computed = 0
        v.status = SequenceStatus.WAITING
        self.waiting.appendleft(v)
        self.num_preemptions += 1
        return v

    def _phase1(self):
        budget = self.max_num_batched_tokens
        out = {}
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.remaining(), budget)
            while not self._fits(seq, n):
                if self._preempt() is seq:
                    return out
            out[seq.seq_id] = n
            budget -= n
            i += 1
        return out

    def _phase2(self):
        budget = self.max_num_batched_tokens
        out = {}
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            n = min(seq.remaining(), budget)
            if not self._fits(seq, n):
                break
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            out[seq.seq_id] = n
            budget -= n
        return out

    def schedule(self):
        out = self._phase1()
        out.update(self._phase2())
        self._last = out
        return dict(out)

    def update(self):
        last, self._last = self._last, {}
        running = {s.seq_id: s for s in self.running}
        finished = []
        for sid, n in last.items():
            s = running[sid]
            s.num_computed += n
            if s.remaining() == 0:
                t = self.sample_fn(s)
                s.output.append(t)
                if t == self.eos_token_id or len(s.output) >= s.max_tokens:
                    finished.append(s)
        for s in finished:
            s.status = SequenceStatus.FINISHED
            self.running.remove(s)
            self.blocks_used -= s.num_blocks
            s.num_blocks = 0
            self.finished.append(s)
        return finished
