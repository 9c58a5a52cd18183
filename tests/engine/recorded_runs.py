"""Recorded runs of vLLM (tests/engine_subjects/vllm/*.json: plain data, no vLLM needed), as
the checks' tests read and break them: the trace, the checks vLLM's runs make, a step
changed."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.trace import EngineStep, EngineTrace
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.invariants.violation import Violation

SUBJECTS = Path(__file__).resolve().parent.parent / "engine_subjects" / "vllm"
CHECKS = active(on=VLLM.policies_on)


def recorded(name: str) -> EngineTrace:
    return EngineTrace.from_dict(json.loads((SUBJECTS / name).read_text()))


def fired(trace: EngineTrace, check: str) -> list[Violation]:
    """What `check` says of `trace`, among the checks a vLLM run makes."""
    return [v for v in check_engine(trace, CHECKS) if v.check == check]


def at(trace: EngineTrace, step: int, change: Callable[[EngineStep], EngineStep]) -> EngineTrace:
    """`trace` with its step `step` changed."""
    steps = list(trace.steps)
    steps[step - 1] = change(steps[step - 1])
    return replace(trace, steps=tuple(steps))
