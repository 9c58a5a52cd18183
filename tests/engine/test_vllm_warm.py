"""vLLM's warm-up (engine/vllm/drive.py's warm): a release whose calls this driver does not fit
is told before the search, as a usage error; a drafting run that a check fails without an
exception is not that: the search reports it as a verdict (0.25.0 and 0.26.0 got stuck on
VLLM-06 in a drafting warm-up run and were told "cannot be driven"). No vLLM needed: the runs
are stood in for."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from schedcheck.engine.trace import UNDRIVABLE, EngineFailure
from schedcheck.engine.vllm import drive
from schedcheck.engine.vllm.modes import Mode
from schedcheck.engine.workload import EngineWorkload


def warm_with(monkeypatch: pytest.MonkeyPatch, check: str) -> None:
    """warm() where every drafting run fails by `check` and every plain one passes."""

    def run(build: Any, workload: EngineWorkload, mode: Mode) -> Any:
        failure = EngineFailure(check, 7, "schedule()", "what it said") if workload.drafts else None
        return SimpleNamespace(failure=failure)

    monkeypatch.setattr(drive, "run_vllm", run)
    build = SimpleNamespace(prepare_drafters=lambda: None, drafters=("hidden",), version="0.25.0")
    drive.warm(build, [Mode.parse("async-v1")])  # type: ignore[arg-type]


@pytest.mark.parametrize("check", ["E5", "E11", UNDRIVABLE])
def test_a_drafting_run_a_check_fails_is_left_to_the_search(
    monkeypatch: pytest.MonkeyPatch, check: str
) -> None:
    warm_with(monkeypatch, check)


def test_a_drafting_run_that_raises_is_a_driver_that_does_not_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(RuntimeError, match=r"cannot be driven .* async-v1: a warm-up run failed"):
        warm_with(monkeypatch, "E6")
