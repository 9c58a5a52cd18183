"""Bug: update() never compares the sampled token with eos_token_id.

Symptom: a sequence that samples eos runs on to max_tokens. Caught by A1.
"""

from scheduler import Scheduler as _Reference
from scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def update(self) -> list[Sequence]:
        scheduled, self._scheduled = self._scheduled, {}
        by_id = {seq.seq_id: seq for seq in self.running}
        done = []
        for seq_id, n in scheduled.items():
            seq = by_id[seq_id]
            seq.num_computed += n
            if seq.num_computed < seq.num_tokens:
                continue
            token = self.sample_fn(seq)
            seq.output.append(token)
            if len(seq.output) >= seq.max_tokens:  # the bug: no token == eos_token_id
                self.running.remove(seq)
                self._finish(seq)
                done.append(seq)
        return done
