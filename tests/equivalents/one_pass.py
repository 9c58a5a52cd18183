"""Equivalent: no helper methods at all, schedule() and update() do everything inline.

Written in one sitting by a student in a hurry: the block arithmetic (ceil by negative floor
division), the recompute preemption and the finishing of a sequence are all spelled out
right where they happen, with short local names (s, n, v, bs, i). Phase 1 is an index
while loop with a flag for "preempted itself"; phase 2 only ever looks at waiting[0].
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
    def __init__(
        self,
        num_blocks,
        block_size,
        max_num_seqs,
        max_num_batched_tokens,
        sample_fn,
        eos_token_id=None,
    ):
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
        self.last = {}  # update() has no arguments, so it reads this

    def add(self, seq):
        self.waiting.append(seq)

    def schedule(self):
        bs = self.block_size
        budget = self.max_num_batched_tokens
        out = {}

        # phase 1: running, by index, because preempting shortens the list under us
        i = 0
        while i < len(self.running) and budget > 0:
            s = self.running[i]
            n = min(s.num_tokens - s.num_computed, budget)
            # blocks for what it will hold after this step, not for num_tokens
            need = max(0, -(-(s.num_computed + n) // bs) - s.num_blocks)
            gone = False
            while self.blocks_used + need > self.num_blocks:
                v = self.running.pop()  # latest admitted goes first
                self.blocks_used -= v.num_blocks
                v.num_blocks = 0
                v.num_computed = 0  # KV is gone, the output is kept
                v.status = SequenceStatus.WAITING
                self.waiting.appendleft(v)
                self.num_preemptions += 1
                if v is s:
                    gone = True
                    break
            if gone:
                continue  # running[i] is already the next one
            s.num_blocks += need
            self.blocks_used += need
            out[s.seq_id] = n
            budget -= n
            i += 1

        # phase 2: strict FCFS, the head blocks everyone behind it
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            s = self.waiting[0]
            n = min(s.num_tokens - s.num_computed, budget)
            need = max(0, -(-(s.num_computed + n) // bs) - s.num_blocks)
            if self.blocks_used + need > self.num_blocks:
                break
            s.num_blocks += need
            self.blocks_used += need
            self.waiting.popleft()
            s.status = SequenceStatus.RUNNING
            self.running.append(s)
            out[s.seq_id] = n
            budget -= n

        self.last = out
        return dict(out)

    def update(self):
        todo, self.last = self.last, {}
        by_id = {s.seq_id: s for s in self.running}  # running shrinks while we loop
        done = []
        for sid, n in todo.items():
            s = by_id[sid]
            s.num_computed += n
            if s.num_computed != s.num_tokens:
                continue  # mid-prefill chunk: nothing to sample yet
            tok = self.sample_fn(s)
            s.output.append(tok)
            if tok == self.eos_token_id or len(s.output) >= s.max_tokens:
                s.status = SequenceStatus.FINISHED
                self.blocks_used -= s.num_blocks
                s.num_blocks = 0
                self.running.remove(s)
                self.finished.append(s)
                done.append(s)
        return done
