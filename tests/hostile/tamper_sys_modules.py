"""Tampering: the module objects in sys.modules swapped: every schedcheck module, json,
time and traceback replaced by an empty module of the same name.

Expected: a FAIL naming a check, in every mode; never a pass, never schedcheck's own error.
"""

import sys
import types

for _name in list(sys.modules):
    if _name.split(".")[0] in ("schedcheck", "json", "time", "traceback"):
        sys.modules[_name] = types.ModuleType(_name)

# --- the buggy scheduler (tests/sandbox/test_tampering.py swaps in other mutants from here on)
from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _preempt(self, seq: Sequence) -> None:
        super()._preempt(seq)
        seq.output.clear()  # the bug: output cleared on preemption (caught by I4)
