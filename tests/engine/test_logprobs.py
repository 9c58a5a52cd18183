"""E24, prompt logprobs (EngineRequest.logprobs_from; schedcheck/engine/logprobs.py), on a
run of SGLang 0.5.23's real Scheduler recorded here (tests/engine_subjects/sglang/
logprobs_trace.json: plain data, no SGLang needed), and on that run broken one way.

The recorded run (the normal loop, pages of 1, a budget of 4): r1 (prompt [1 2 1 2 1]) is
prefilled at steps 1 and 2; r2 ([1 2 1 2 2], its prompt's logprobs asked from position 1:
`return_logprob`, `logprob_start_len` 1) arrives at step 4 and starts at position 1, though
the tree holds r1's [1 2 1 2]: SGLang caps its match at the logprob start. r3 ([1 2 1 2 2
1], logprobs from 6, its whole prompt: none of its prompt's) and r4 (the same prompt, no
logprobs) arrive at step 6 and both start at 5, over r2's KV.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from schedcheck.engine.adapter import PLAIN
from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.command import unsupported
from schedcheck.engine.sglang.adapter import ADAPTER as SGLANG
from schedcheck.engine.strategies import LOGPROBS_CAP, observe
from schedcheck.engine.trace import EngineStep, EngineTrace
from schedcheck.engine.workload import EngineWorkload

TRACE = (
    Path(__file__).resolve().parent.parent / "engine_subjects" / "sglang" / "logprobs_trace.json"
)
CHECKS = active(on=SGLANG.policies_on)


def recorded() -> EngineTrace:
    return EngineTrace.from_dict(json.loads(TRACE.read_text()))


def test_the_recorded_run_is_what_the_docstring_says_and_every_check_holds() -> None:
    trace = recorded()
    assert [r.logprobs_from for r in trace.workload.requests] == [-1, 1, 6, -1]
    assert check_engine(trace, CHECKS) == [] and "E24" in CHECKS
    first: dict[str, tuple[int, int]] = {}
    for step in trace.steps:
        for seq in step.scheduled:
            first.setdefault(seq.name, (step.step, seq.num_cached))
    assert first == {"r1": (1, 0), "r2": (4, 1), "r3": (6, 5), "r4": (6, 5)}
    assert LOGPROBS_CAP in observe(trace)


def test_e24_fires_on_a_first_prefill_that_starts_past_the_logprob_start() -> None:
    """r2's first prefill moved to start at 4, over r1's [1 2 1 2]: positions 1..3 would
    have no logits. A later prefill past it (after a preemption) is not held to it."""

    def moved(step: EngineStep) -> EngineStep:
        if step.step != 4:
            return step
        views = tuple(
            s._replace(num_cached=4, num_scheduled=1) if s.name == "r2" else s
            for s in step.scheduled
        )
        return replace(step, scheduled=views)

    trace = recorded()
    broken = replace(trace, steps=tuple(moved(s) for s in trace.steps))
    found = [v for v in check_engine(broken, CHECKS) if v.check == "E24"]
    assert [(v.step, v.seq_ids) for v in found] == [(4, ("r2",))]
    assert "from position 1, but its first prefill starts at position 4" in found[0].message
    first = trace.steps[3]
    again = replace(
        first,
        step=len(trace.steps) + 1,
        scheduled=tuple(
            v._replace(num_cached=4, num_scheduled=1) for v in first.scheduled if v.name == "r2"
        ),
    )
    later = replace(trace, steps=(*trace.steps, again))  # r2 prefilled again, past 1
    assert [v for v in check_engine(later, ["E24"])] == []


def test_logprobs_from_round_trips_is_checked_and_is_refused_where_not_driven() -> None:
    w = recorded().workload
    assert EngineWorkload.from_json(w.to_json()) == w
    past = replace(w, requests=(replace(w.requests[0], logprobs_from=6), *w.requests[1:]))
    assert any(
        "logprobs_from 6 is not a position of its prompt of 5" in p for p in past.problems(1)
    )
    assert "prompt logprobs, which this engine's adapter does not drive" in " ".join(
        unsupported(w, PLAIN, ("normal",))
    )
    assert unsupported(w, SGLANG.features, ("overlap", "normal")) == []
