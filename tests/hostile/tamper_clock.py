"""Tampering: the clocks the worker's heartbeat reads: time.monotonic and
time.perf_counter stand still, time.process_time claims a day of CPU time.

Expected: a FAIL naming a check, in every mode; never a pass, never schedcheck's own error.
"""

import time

time.monotonic = time.perf_counter = lambda: 0.0
time.process_time = lambda: 86400.0

# --- the buggy scheduler (tests/sandbox/test_tampering.py swaps in other mutants from here on)
from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _preempt(self, seq: Sequence) -> None:
        super()._preempt(seq)
        seq.output.clear()  # the bug: output cleared on preemption (caught by I4)
