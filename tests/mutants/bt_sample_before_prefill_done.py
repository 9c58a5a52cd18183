"""Bug: sample_fn called before the prefill is complete (spec bug table, row 5).

Symptom: extra output tokens; max_tokens reached early. Caught by I3.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def update(self) -> list[Sequence]:
        scheduled, self._scheduled = self._scheduled, {}
        by_id = {seq.seq_id: seq for seq in self.running}
        done = []
        for seq_id, n in scheduled.items():
            seq = by_id[seq_id]
            seq.num_computed += n
            token = self.sample_fn(seq)  # the bug: even mid-prefill
            seq.output.append(token)
            if token == self.eos_token_id or len(seq.output) >= seq.max_tokens:
                self.running.remove(seq)
                self._finish(seq)
                done.append(seq)
        return done
