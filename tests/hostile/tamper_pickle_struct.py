"""Tampering: pickle and struct, which the worker's connection frames its replies with,
replaced by functions that raise; os.write swallows what it is given.

Expected: a FAIL naming a check, in every mode; never a pass, never schedcheck's own error.
"""

import os
import pickle
import struct


def _broken(*args: object, **kwargs: object) -> bytes:
    raise RuntimeError("tampered")


pickle.dumps = pickle.loads = _broken
struct.pack = struct.unpack = _broken
os.write = lambda fd, data: len(data)

# --- the buggy scheduler (tests/sandbox/test_tampering.py swaps in other mutants from here on)
from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _preempt(self, seq: Sequence) -> None:
        super()._preempt(seq)
        seq.output.clear()  # the bug: output cleared on preemption (caught by I4)
