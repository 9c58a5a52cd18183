"""Bug: a finished sequence's blocks are "given back" after its count was set to zero
(`seq.num_blocks = 0` first, then `blocks_used -= seq.num_blocks`), so `blocks_used` never
goes down when a sequence finishes; preemption gives them back in the right order.

Written with the finishing in a method of its own. Caught by I1.
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
        self.last_schedule = {}

    def add(self, seq):
        self.waiting.append(seq)

    def allocate(self, seq, tokens):
        total = tokens // self.block_size + (1 if tokens % self.block_size else 0)
        extra = total - seq.num_blocks
        if extra <= 0:
            return True
        if self.blocks_used + extra > self.num_blocks:
            return False
        self.blocks_used += extra
        seq.num_blocks = total
        return True

    def schedule(self):
        budget = self.max_num_batched_tokens
        result = {}
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed, budget)
            while not self.allocate(seq, seq.num_computed + n):
                victim = self.running.pop()
                self.blocks_used -= victim.num_blocks
                victim.num_blocks = 0
                victim.num_computed = 0
                victim.status = SequenceStatus.WAITING
                self.waiting.appendleft(victim)
                self.num_preemptions += 1
                if victim is seq:
                    break
            else:
                result[seq.seq_id] = n
                budget -= n
                i += 1
                continue
            break
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            head = self.waiting[0]
            n = min(head.num_tokens - head.num_computed, budget)
            if not self.allocate(head, head.num_computed + n):
                break
            self.waiting.popleft()
            head.status = SequenceStatus.RUNNING
            self.running.append(head)
            result[head.seq_id] = n
            budget -= n
        self.last_schedule = result
        return dict(result)

    def finish(self, seq):
        seq.status = SequenceStatus.FINISHED
        self.running.remove(seq)
        seq.num_blocks = 0
        self.blocks_used -= seq.num_blocks
        self.finished.append(seq)

    def update(self):
        plan, self.last_schedule = self.last_schedule, {}
        seqs = {s.seq_id: s for s in self.running}
        ended = []
        for sid, n in plan.items():
            seq = seqs[sid]
            seq.num_computed += n
            if seq.num_computed == seq.num_tokens:
                token = self.sample_fn(seq)
                seq.output.append(token)
                if token == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                    ended.append(seq)
        for seq in ended:
            self.finish(seq)
        return ended
