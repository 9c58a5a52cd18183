"""Bug: update() walks the step's record sorted by seq_id instead of in scheduling order.

Symptom: tokens are sampled, and finished sequences returned, in seq_id order; with seq_ids
named a1, a2, ... in arrival order that is the scheduling order often enough to hide, but
not with names that sort otherwise ('10' before '9'). Caught by A1 or R1.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def update(self) -> list[Sequence]:
        scheduled, self._scheduled = self._scheduled, {}
        if not scheduled:
            return []
        by_id = {seq.seq_id: seq for seq in self.running}
        done: list[Sequence] = []
        for seq_id, n in sorted(scheduled.items()):  # the bug: sorted by seq_id
            seq = by_id[seq_id]
            seq.num_computed += n
            if seq.num_computed < seq.num_tokens:
                continue
            token = self.sample_fn(seq)
            seq.output.append(token)
            if self._ends(seq, token):
                self._finish(seq)
                done.append(seq)
        if done:
            self.running[:] = [s for s in self.running if s.status is not SequenceStatus.FINISHED]
        return done
