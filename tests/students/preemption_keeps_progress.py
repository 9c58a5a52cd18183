"""Bug: preemption gives the victim's blocks back but keeps its `num_computed` ("the
progress is kept, only the memory goes"): when it comes back it computes only what it had
left, with no KV for what it had computed before.

Written with `__slots__` and string-valued statuses. Caught by I5, I7 or R1.
"""

from collections import deque
from enum import Enum


class SequenceStatus(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class Sequence:
    __slots__ = ("seq_id", "prompt_len", "max_tokens", "output", "num_computed",
                 "num_blocks", "status")

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
        self.todo = {}

    def add(self, seq):
        self.waiting.append(seq)

    def _need(self, seq, n):
        return -((seq.num_computed + n) // -self.block_size) - seq.num_blocks

    def _take(self, seq, n):
        need = self._need(seq, n)
        if self.blocks_used + max(need, 0) > self.num_blocks:
            return False
        if need > 0:
            self.blocks_used += need
            seq.num_blocks += need
        return True

    def _evict(self):
        v = self.running.pop()
        self.blocks_used -= v.num_blocks
        v.num_blocks = 0
        v.status = SequenceStatus.WAITING  # its num_computed is its progress: kept
        self.waiting.appendleft(v)
        self.num_preemptions += 1
        return v

    def schedule(self):
        budget = self.max_num_batched_tokens
        todo = {}
        i = 0
        while i < len(self.running) and budget > 0:
            s = self.running[i]
            n = min(s.num_tokens - s.num_computed, budget)
            dropped = False
            while not self._take(s, n):
                if self._evict() is s:
                    dropped = True
                    break
            if dropped:
                break
            todo[s.seq_id] = n
            budget -= n
            i += 1
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            s = self.waiting[0]
            n = min(s.num_tokens - s.num_computed, budget)
            if not self._take(s, n):
                break
            self.waiting.popleft()
            s.status = SequenceStatus.RUNNING
            self.running.append(s)
            todo[s.seq_id] = n
            budget -= n
        self.todo = todo
        return dict(todo)

    def update(self):
        todo, self.todo = self.todo, {}
        live = {s.seq_id: s for s in self.running}
        done = []
        for sid, n in todo.items():
            s = live[sid]
            s.num_computed += n
            if s.num_computed == s.num_tokens:
                tok = self.sample_fn(s)
                s.output.append(tok)
                if tok == self.eos_token_id or len(s.output) >= s.max_tokens:
                    done.append(s)
        for s in done:
            s.status = SequenceStatus.FINISHED
            self.running.remove(s)
            self.blocks_used -= s.num_blocks
            s.num_blocks = 0
            self.finished.append(s)
        return done
