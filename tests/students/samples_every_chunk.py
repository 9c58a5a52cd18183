"""Bug: `update()` samples a token for every scheduled sequence, also after a prefill chunk
that is not the last: "every step makes a token". A chunked prompt gets tokens before its
prompt is all computed.

Written with a status-object style: the sequence knows how to advance itself.
Caught by I3.
"""

from collections import deque
from enum import Enum


class SequenceStatus(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


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

    def left(self):
        return self.num_tokens - self.num_computed

    def advance(self, n, sample_fn):
        self.num_computed += n
        token = sample_fn(self)
        self.output.append(token)
        return token


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
        self.step_plan = {}

    def add(self, seq):
        self.waiting.append(seq)

    def try_alloc(self, seq, n):
        need = -(-(seq.num_computed + n) // self.block_size) - seq.num_blocks
        if need > 0 and self.blocks_used + need > self.num_blocks:
            return False
        if need > 0:
            self.blocks_used += need
            seq.num_blocks += need
        return True

    def preempt_tail(self):
        v = self.running.pop()
        self.blocks_used -= v.num_blocks
        v.num_blocks = 0
        v.num_computed = 0
        v.status = SequenceStatus.WAITING
        self.waiting.appendleft(v)
        self.num_preemptions += 1
        return v

    def schedule(self):
        budget = self.max_num_batched_tokens
        plan = {}
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.left(), budget)
            while not self.try_alloc(seq, n):
                if self.preempt_tail() is seq:
                    break
            if seq.status is SequenceStatus.WAITING:
                break
            plan[seq.seq_id] = n
            budget -= n
            i += 1
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            n = min(seq.left(), budget)
            if not self.try_alloc(seq, n):
                break
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            plan[seq.seq_id] = n
            budget -= n
        self.step_plan = plan
        return dict(plan)

    def update(self):
        plan, self.step_plan = self.step_plan, {}
        seqs = {s.seq_id: s for s in self.running}
        finished = []
        for sid, n in plan.items():
            seq = seqs[sid]
            token = seq.advance(n, self.sample_fn)
            if token == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                finished.append(seq)
        for seq in finished:
            seq.status = SequenceStatus.FINISHED
            self.running.remove(seq)
            self.blocks_used -= seq.num_blocks
            seq.num_blocks = 0
            self.finished.append(seq)
        return finished
