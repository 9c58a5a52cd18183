"""Tampering: sys.stdout and sys.stderr replaced by files whose write() ends the process
(SystemExit), and print() by a function that raises.

Expected: a FAIL naming a check, in every mode; never a pass, never schedcheck's own error.
"""

import builtins
import sys


class _Exits:
    def write(self, text: str) -> int:
        raise SystemExit(0)

    def flush(self) -> None:
        raise SystemExit(0)


sys.stdout = sys.stderr = _Exits()
builtins.print = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("tampered"))

# --- the buggy scheduler (tests/sandbox/test_tampering.py swaps in other mutants from here on)
from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _preempt(self, seq: Sequence) -> None:
        super()._preempt(seq)
        seq.output.clear()  # the bug: output cleared on preemption (caught by I4)
