"""verify's own guards: the reference's run is ours, so a reference run that fails is
schedcheck's fault (CheckerError, exit 3), never a verdict on the implementation held to it,
for one scheduler as for two alive at once."""

from __future__ import annotations

import types

import pytest

from schedcheck import scheduler as reference
from schedcheck.drive.impl import InProcess
from schedcheck.faults import CheckerError
from schedcheck.verdict import verify as verifying
from tests.workloads import EXAMPLES


class _Broken(reference.Scheduler):  # type: ignore[misc]
    def schedule(self) -> dict[str, int]:
        raise RuntimeError("a broken reference")


def _broken_reference() -> types.ModuleType:
    module = types.ModuleType("broken_reference")
    module.Scheduler = _Broken  # type: ignore[attr-defined]
    module.Sequence = reference.Sequence  # type: ignore[attr-defined]
    module.SequenceStatus = reference.SequenceStatus  # type: ignore[attr-defined]
    return module


def test_a_reference_run_that_fails_is_ours_not_a_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    workload = next(iter(EXAMPLES.values()))
    impl = InProcess(reference, "a file written otherwise")
    assert verifying.verify(impl, workload, ("R1",), lockstep=True).ok
    monkeypatch.setattr(verifying, "load_impl", _broken_reference)
    with pytest.raises(CheckerError, match="the reference failed on this workload"):
        verifying.verify(impl, workload, ("R1",), lockstep=True)
    with pytest.raises(CheckerError, match="the reference failed on this workload"):
        verifying.verify_pair(impl, workload, workload, ("R1",), lockstep=True)
