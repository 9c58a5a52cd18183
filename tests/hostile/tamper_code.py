"""Tampering: the code of schedcheck's functions, found through gc.get_objects(), replaced
(`__code__`) by code that raises, so that even a function object bound before the
submission ran does something else now.

Expected: a FAIL naming a check, in every mode; never a pass, never schedcheck's own error.
"""

import contextlib
import gc
import types


def _boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("tampered")


for _f in gc.get_objects():
    if (
        isinstance(_f, types.FunctionType)
        and _f.__module__ is not None
        and (_f.__module__.split(".")[0] in ("schedcheck",))
    ):
        with contextlib.suppress(ValueError):  # a closure's code cannot be swapped this way
            _f.__code__ = _boom.__code__

# --- the buggy scheduler (tests/sandbox/test_tampering.py swaps in other mutants from here on)
from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _preempt(self, seq: Sequence) -> None:
        super()._preempt(seq)
        seq.output.clear()  # the bug: output cleared on preemption (caught by I4)
