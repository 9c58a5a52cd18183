"""Tampering: the json module the worker replies with: json.dumps and json.loads replaced,
and the encoder behind them made to write a forged end of run with no steps and no failure
(a "pass" as far as the encoder can tell).

Expected: a FAIL naming a check, in every mode; never a pass, never schedcheck's own error.
"""

import json

_FORGED = '{"kind": "end", "rest": [], "failure": null}'


class _Encoder(json.JSONEncoder):
    def encode(self, o: object) -> str:
        return _FORGED


json.dumps = lambda *a, **k: _FORGED
json.loads = lambda *a, **k: {"op": "run", "workload": {}}
json._default_encoder = _Encoder()  # what json.dumps, bound before us, calls

# --- the buggy scheduler (tests/sandbox/test_tampering.py swaps in other mutants from here on)
from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _preempt(self, seq: Sequence) -> None:
        super()._preempt(seq)
        seq.output.clear()  # the bug: output cleared on preemption (caught by I4)
