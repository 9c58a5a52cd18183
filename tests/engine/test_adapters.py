"""LoRA adapters (EngineRequest.adapter, EngineConfig.max_adapters; E25 in
schedcheck/engine/adapters.py, E23 over adapters in namespaces.py), on runs of SGLang
0.5.23's real Scheduler recorded here (plain data, no SGLang needed), and on those runs
broken one way at a time.

tests/engine_subjects/sglang/adapters_trace.json (the normal loop, pages of 1, a server of
two adapters at once): r1 ([1 2 1 2], adapter x) is prefilled at step 1; r2 (the same
prompt, the base model) arrives at step 2 with r3 ([1 2 1 1], adapter y): r2 is admitted
and computed from position 0 (r1's KV is adapter x's), and runs beside r1 (two adapters,
the base model counted, as SGLang counts it); r3 waits until they finish."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from schedcheck.engine.adapter import PLAIN
from schedcheck.engine.adapters import at_limit, step_adapters
from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.command import unsupported
from schedcheck.engine.sglang.adapter import ADAPTER as SGLANG
from schedcheck.engine.strategies import ADAPTERS_FULL, engine_workloads, labels, observe
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.workload import EngineWorkload

SUBJECTS = Path(__file__).resolve().parent.parent / "engine_subjects" / "sglang"
CHECKS = active(on=SGLANG.policies_on)


def recorded(name: str = "adapters_trace.json") -> EngineTrace:
    return EngineTrace.from_dict(json.loads((SUBJECTS / name).read_text()))


def serving(trace: EngineTrace, slots: int, **adapters: str) -> EngineTrace:
    """The trace on a server of `slots` adapters, some requests' adapters changed."""
    w = trace.workload
    requests = tuple(replace(r, adapter=adapters.get(r.name, r.adapter)) for r in w.requests)
    config = replace(w.config, max_adapters=slots)
    return replace(trace, workload=replace(w, config=config, requests=requests))


def test_the_recorded_run_is_what_the_docstring_says_and_every_check_holds() -> None:
    trace = recorded()
    assert [r.adapter for r in trace.workload.requests] == ["x", "", "y"]
    assert trace.traits.base_is_adapter and trace.workload.config.max_adapters == 2
    assert check_engine(trace, CHECKS) == [] and {"E23", "E25"} <= set(CHECKS)
    first = {}
    for step in trace.steps:
        for seq in step.scheduled:
            first.setdefault(seq.name, (step.step, seq.num_cached))
    assert first["r1"] == (1, 0) and first["r2"] == (2, 0) and first["r3"][0] > 3
    both = [s.step for s in trace.steps if {q.name for q in s.scheduled} == {"r1", "r2"}]
    assert both and all(step_adapters(trace, trace.steps[n - 1]) == {"x", ""} for n in both)
    assert ADAPTERS_FULL in observe(trace)


def test_e25_fires_on_a_step_over_the_limit_and_counts_the_base_as_the_engine_does() -> None:
    """On a server of one adapter at once, the step running r1 (x) and r2 (the base model)
    runs two, where the base model counts (SGLang's); where it does not (vLLM's
    max_loras), one: E25 is quiet."""
    over = serving(recorded(), 1)
    found = [v for v in check_engine(over, CHECKS) if v.check == "E25"]
    assert len(found) == 1 and "runs 2 adapters (the base model counted as one)" in (
        found[0].message
    )
    apart = replace(over, traits=replace(over.traits, base_is_adapter=False))
    assert [v for v in check_engine(apart, CHECKS) if v.check == "E25"] == []
    # at step 3 r3 (adapter y) waits while the step runs as many as served, either way;
    # on a server of three, the step is below its limit
    assert at_limit(over, over.steps[2]) and at_limit(apart, apart.steps[2])
    assert not at_limit(serving(recorded(), 3), over.steps[2])


def test_e23_fires_on_a_hit_across_adapters_and_not_within_one() -> None:
    """The namespace run (tests/engine/test_namespaces.py): r4 starts over r2's KV, both of
    the shared namespace. r4 under adapter x reads the base model's KV: E23; r2 and r4 both
    under x: quiet."""
    trace = recorded("namespace_trace.json")
    found = check_engine(serving(trace, 2, r4="x"), CHECKS)
    assert [(v.check, v.seq_ids) for v in found] == [("E23", ("r4", "r2"))]
    assert "(namespace '', adapter 'x')" in found[0].message
    assert check_engine(serving(trace, 2, r2="x", r4="x"), CHECKS) == []


def test_adapters_round_trip_are_checked_and_are_refused_where_not_driven() -> None:
    w = recorded().workload
    assert EngineWorkload.from_json(w.to_json()) == w
    bad = replace(w, requests=(replace(w.requests[0], adapter="a b"), *w.requests[1:]))
    assert any("adapter 'a b'" in p for p in bad.problems(1))
    none = replace(w, config=replace(w.config, max_adapters=0))
    assert any("max_adapters 0" in p for p in none.problems(1))
    assert any(
        "max_adapters 9" in p
        for p in replace(w, config=replace(w.config, max_adapters=9)).problems(1)
    )
    assert "LoRA adapters, which this engine's adapter does not drive" in " ".join(
        unsupported(w, PLAIN, ("normal",))
    )
    assert unsupported(w, SGLANG.features, ("overlap", "normal")) == []


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_adapters_are_drawn_only_where_the_engine_serves_them(data: st.DataObject) -> None:
    sglang = data.draw(engine_workloads(features=SGLANG.features))
    assert all(r.adapter in ("", "x", "y") for r in sglang.requests)
    assert sglang.config.max_adapters in (0, 1, 2)
    assert not (sglang.config.max_adapters and sglang.drafts)
    plain = data.draw(engine_workloads(features=PLAIN))
    assert not plain.config.max_adapters and not any(r.adapter for r in plain.requests)
    assert ADAPTERS_FULL in labels(SGLANG.features) and ADAPTERS_FULL not in labels(PLAIN)
