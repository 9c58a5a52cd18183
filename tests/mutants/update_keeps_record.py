"""Bug: update() does not forget the record of the last schedule().

Symptom: a second update() without a schedule() applies the same step again, or raises
KeyError for a sequence the first one finished. Caught by C1 or A1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def update(self) -> list[Sequence]:
        scheduled = self._scheduled  # the bug: not reset to {}
        by_id = {seq.seq_id: seq for seq in self.running}
        done = []
        for seq_id, n in scheduled.items():
            seq = by_id[seq_id]
            seq.num_computed += n
            if seq.num_computed < seq.num_tokens:
                continue
            token = self.sample_fn(seq)
            seq.output.append(token)
            if token == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                self.running.remove(seq)
                self._finish(seq)
                done.append(seq)
        return done
