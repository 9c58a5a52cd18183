"""Tampering: a reply nested too deep to decode, forged on the worker's own socket: at import
(where "ready" is awaited) and from a SIGALRM timer that fires during the run, a message of
100,000 nested lists. json.loads raises RecursionError on it, not ValueError: a parent that
caught only ValueError crashed (schedcheck's own error, from a submission's bytes).

Expected: a FAIL naming a check, in every mode; never a pass, never schedcheck's own error.
"""

import contextlib
import os
import signal
import stat
import struct

_NESTED = b"[" * 100_000 + b"]" * 100_000


def _sockets() -> list[int]:
    found = []
    for fd in range(256):  # /proc may be out of view in the box
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                found.append(fd)
    return found


def _forge(*args: object) -> None:
    for fd in _sockets():
        with contextlib.suppress(OSError):
            os.write(fd, struct.pack("!i", len(_NESTED)) + _NESTED)


_forge()
signal.signal(signal.SIGALRM, _forge)
signal.setitimer(signal.ITIMER_REAL, 0.01, 0.05)

# --- the buggy scheduler (tests/sandbox/test_tampering.py swaps in other mutants from here on)
from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _preempt(self, seq: Sequence) -> None:
        super()._preempt(seq)
        seq.output.clear()  # the bug: output cleared on preemption (caught by I4)
