"""Bug: `Sequence.__init__(..., output=[])`, a mutable default: every sequence the driver
makes shares one output list, so each token sampled lands in every sequence's output.

Written as a careful student writes it, with small helpers and a docstring a method; the
default looked like a convenience for tests that pass an output in. Caught by A1 or R1.
"""

from collections import deque
from enum import Enum


class SequenceStatus(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class Sequence:
    def __init__(self, seq_id, prompt_len, max_tokens, output=[]):
        self.seq_id = seq_id
        self.prompt_len = prompt_len
        self.max_tokens = max_tokens
        self.output = output
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
        self._plan = {}

    def add(self, seq):
        """New requests queue at the tail."""
        self.waiting.append(seq)

    def _blocks_for(self, tokens):
        """Blocks needed to hold `tokens` tokens of KV."""
        return (tokens + self.block_size - 1) // self.block_size

    def _grow(self, seq, tokens):
        """Give `seq` the blocks for `tokens` tokens, all or nothing."""
        need = self._blocks_for(tokens) - seq.num_blocks
        if self.blocks_used + need > self.num_blocks:
            return False
        if need > 0:
            seq.num_blocks += need
            self.blocks_used += need
        return True

    def _release(self, seq):
        """Give back every block `seq` holds."""
        self.blocks_used -= seq.num_blocks
        seq.num_blocks = 0

    def _preempt_last(self):
        """Recompute preemption of the last admitted sequence; returns it."""
        victim = self.running.pop()
        self._release(victim)
        victim.num_computed = 0
        victim.status = SequenceStatus.WAITING
        self.waiting.appendleft(victim)
        self.num_preemptions += 1
        return victim

    def schedule(self):
        """Phase 1 over running by index, then strict FCFS admission."""
        budget = self.max_num_batched_tokens
        plan = {}
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed, budget)
            scheduled = True
            while not self._grow(seq, seq.num_computed + n):
                if self._preempt_last() is seq:
                    scheduled = False
                    break
            if not scheduled:
                break
            plan[seq.seq_id] = n
            budget -= n
            i += 1
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            n = min(seq.num_tokens - seq.num_computed, budget)
            if not self._grow(seq, seq.num_computed + n):
                break
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            plan[seq.seq_id] = n
            budget -= n
        self._plan = plan
        return dict(plan)

    def update(self):
        """Advance what was scheduled; sample where a sequence is all computed."""
        plan, self._plan = self._plan, {}
        by_id = {seq.seq_id: seq for seq in self.running}
        ended = []
        for seq_id, n in plan.items():
            seq = by_id[seq_id]
            seq.num_computed += n
            if seq.num_computed < seq.num_tokens:
                continue
            token = self.sample_fn(seq)
            seq.output.append(token)
            if token == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                ended.append(seq)
        for seq in ended:
            seq.status = SequenceStatus.FINISHED
            self.running.remove(seq)
            self._release(seq)
            self.finished.append(seq)
        return ended
