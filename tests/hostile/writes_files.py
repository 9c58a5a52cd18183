"""Writes files: into its working directory, and tries the project's checkout and /tmp.
Has a real bug too (num_preemptions not counted).

Expected: a failure; nothing lands in the project's checkout.
"""

import contextlib
import pathlib

import schedcheck
from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


PROJECT = pathlib.Path(schedcheck.__file__).resolve().parent.parent
for target in (pathlib.Path("scratch.txt"), PROJECT / "PWNED.txt", PROJECT / "scheduler" / "x.py"):
    with contextlib.suppress(OSError):
        target.write_text("written by a submission")


class Scheduler(_Reference):
    def _preempt(self, seq: Sequence) -> None:
        super()._preempt(seq)
        self.num_preemptions -= 1  # the bug: preemptions are not counted
