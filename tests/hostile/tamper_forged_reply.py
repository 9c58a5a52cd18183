"""Tampering: replies forged on the worker's own socket: at import, "ready" with an
internal error of schedcheck's; an atexit handler and signal handlers (SIGTERM, and a
SIGALRM timer that fires during the run) that write "schedcheck's driver failed".

Expected: a FAIL naming a check, in every mode; never a pass, never schedcheck's own error.
"""

import atexit
import contextlib
import json
import os
import signal
import stat
import struct


def _sockets() -> list[int]:
    found = []
    for fd in range(256):  # /proc may be out of view in the box
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                found.append(fd)
    return found


def _forge(message: dict[str, object]) -> None:
    data = json.dumps(message).encode()
    for fd in _sockets():
        with contextlib.suppress(OSError):
            os.write(fd, struct.pack("!i", len(data)) + data)


def _internal(*args: object) -> None:
    _forge({"kind": "internal", "message": "RuntimeError: schedcheck's own bug (forged)"})


_forge({"kind": "ready", "internal": "RuntimeError: schedcheck's own bug (forged)"})
atexit.register(_internal)
signal.signal(signal.SIGTERM, _internal)
signal.signal(signal.SIGALRM, _internal)
signal.setitimer(signal.ITIMER_REAL, 0.01, 0.01)

# --- the buggy scheduler (tests/sandbox/test_tampering.py swaps in other mutants from here on)
from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _preempt(self, seq: Sequence) -> None:
        super()._preempt(seq)
        seq.output.clear()  # the bug: output cleared on preemption (caught by I4)
