"""An engine failure's report shows every field its workload drew (issue 35, point 6: a
priority-preemption counterexample printed without its policy or priorities could not be
read back)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.verdict import report
from schedcheck.invariants.violation import Violation

TRACE = Path(__file__).resolve().parent.parent / "engine_subjects" / "vllm" / "trace.json"


def test_the_report_shows_the_policy_and_each_requests_drawn_fields() -> None:
    trace = EngineTrace.from_dict(json.loads(TRACE.read_text()))
    first, second, *rest = trace.workload.requests
    drawn = (replace(first, priority=2, stop=(1,), abort=3), second, *rest)
    config = replace(trace.workload.config, policy="priority")
    trace = replace(trace, workload=replace(trace.workload, config=config, requests=drawn))
    text = report(Violation("E10", 2, "schedule()", "the wrong victim", ()), trace)
    assert "policy=priority" in text
    assert f"{first.name} prompt {list(first.prompt)} max_tokens {first.max_tokens} " in text
    assert "priority 2 stop [1] aborted at step 3 (step 1)" in text
    plain = text.split(f"{second.name} prompt", 1)[1].split(",", 1)[0]
    assert "priority" not in plain and "stop" not in plain and "aborted" not in plain


def test_the_report_shows_the_mode_the_length_cap_the_resets_and_steps_that_only_update() -> None:
    trace = EngineTrace.from_dict(json.loads((TRACE.parent / "async_trace.json").read_text()))
    config = replace(trace.workload.config, max_model_len=9)
    first, *rest = trace.workload.requests
    requests = (replace(first, abort=3, abort_in_step=True), *rest)
    drawn = replace(trace.workload, config=config, requests=requests, resets=(4,), early=(2, 5))
    trace = replace(trace, workload=drawn)
    text = report(Violation("E7", 8, "end of run", "a wrong output", ()), trace)
    assert "aborted during step 3 (step 1)" in text
    assert "the device done before the engine core looked, at step 2, 5" in text
    assert "policy=fcfs mode=async-v1 max_model_len=9" in text
    assert "prefix cache cleared, running requests preempted, at the start of step 4" in text
    assert "| 8 | - | update only | - | [] |" in text
    assert "| 7 | - | mixed | - | [] |" in text  # an empty schedule() is a step of its own
    # the step's events: the reset, the abort during the step, the batch done early
    assert "| 4 | prefix cache cleared (at the start of the step, requests running); " in text
    assert "| 3 | r1 aborted (during the step); r1 tokens landed (sampled at step 2); " in text
    assert "| 2 | device early (the batch done before the engine core looked); r2 arrives |" in text
