"""Tampering: objects whose __del__ raises BaseException subclasses (KeyboardInterrupt,
SystemExit, GeneratorExit), dropped in every call, and sys.unraisablehook replaced by one
that raises them again.

Expected: a FAIL naming a check, in every mode; never a pass, never schedcheck's own error.
"""

import sys


class _Bomb:
    def __init__(self, kind: type[BaseException]) -> None:
        self.kind = kind

    def __del__(self) -> None:
        raise self.kind("tampered")


def _rethrow(unraisable: object) -> None:
    raise KeyboardInterrupt("tampered")


sys.unraisablehook = _rethrow
_KINDS = (KeyboardInterrupt, SystemExit, GeneratorExit)

# --- the buggy scheduler (tests/sandbox/test_tampering.py swaps in other mutants from here on)
from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def schedule(self) -> dict[str, int]:
        for kind in _KINDS:
            _Bomb(kind)  # dropped at once: __del__ runs inside the call
        return super().schedule()

    def _preempt(self, seq: Sequence) -> None:
        super()._preempt(seq)
        seq.output.clear()  # the bug: output cleared on preemption (caught by I4)
