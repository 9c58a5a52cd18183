"""Tampering: every function of schedcheck's modules it finds in sys.modules becomes
`lambda *a, **k: None` (issue 26's first report: it made `check` exit 3).

Expected: a FAIL naming a check, in every mode; never a pass, never schedcheck's own error.
"""

import sys
import types

for _name, _module in list(sys.modules.items()):
    if _module is not None and _name.split(".")[0] in ("schedcheck",):
        for _attr, _value in list(vars(_module).items()):
            if isinstance(_value, types.FunctionType):
                setattr(_module, _attr, lambda *a, **k: None)

# --- the buggy scheduler (tests/sandbox/test_tampering.py swaps in other mutants from here on)
from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _preempt(self, seq: Sequence) -> None:
        super()._preempt(seq)
        seq.output.clear()  # the bug: output cleared on preemption (caught by I4)
