"""Patches the checker's modules it can reach in its own process, and has a real bug
(output cleared on preemption). It also tries to kill its parent.

Expected: the bug is still caught (the parent decides, not the worker), and the parent lives.
"""

import contextlib
import os
import signal

import harness.drive.driver
import invariants.checks
import invariants.evidence
from scheduler import Scheduler as _Reference
from scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


invariants.checks.check_trace = lambda *args, **kwargs: []  # type: ignore[assignment]
invariants.evidence.preempted = lambda before, after: ()  # type: ignore[assignment]
harness.drive.driver.plain_int = lambda value, what: 0  # type: ignore[assignment]
with contextlib.suppress(OSError):
    os.kill(os.getppid(), signal.SIGKILL)


class Scheduler(_Reference):
    def _preempt(self, seq: Sequence) -> None:
        super()._preempt(seq)
        seq.output.clear()
