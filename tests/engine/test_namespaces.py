"""E23, cache namespaces (EngineRequest.namespace; schedcheck/engine/namespaces.py), on a
run of SGLang 0.5.23's real Scheduler recorded here (tests/engine_subjects/sglang/
namespace_trace.json: plain data, no SGLang needed), and on that run broken one way.

The recorded run (the normal loop, pages of 2): r1 (prompt [1 2 1 2 1], namespace "a") is
prefilled at step 1; r2 ([1 2 1 2 2], the shared namespace) arrives at step 3 and is
computed from position 0, though [1 2 1 2] is in the tree: r1's, another namespace's
(SGLang's `extra_key` keys the tree); r3 ([1 2 1 2 2], namespace "a") arrives at step 5
and starts at position 4, over r1's pages; r4 ([1 2 1 2 2], the shared namespace) at step
7 starts at 4 over r2's.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from schedcheck.engine.adapter import PLAIN
from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.command import unsupported
from schedcheck.engine.sglang.adapter import ADAPTER as SGLANG
from schedcheck.engine.strategies import (
    EMBEDS_APART,
    NAMESPACE_APART,
    engine_workloads,
    labels,
    observe,
)
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.workload import EngineWorkload

TRACE = (
    Path(__file__).resolve().parent.parent / "engine_subjects" / "sglang" / "namespace_trace.json"
)
CHECKS = active(on=SGLANG.policies_on)


def recorded() -> EngineTrace:
    return EngineTrace.from_dict(json.loads(TRACE.read_text()))


def spaced(trace: EngineTrace, **namespaces: str) -> EngineTrace:
    """The trace with some requests' namespaces changed."""
    w = trace.workload
    requests = tuple(replace(r, namespace=namespaces.get(r.name, r.namespace)) for r in w.requests)
    return replace(trace, workload=replace(w, requests=requests))


def test_the_recorded_run_is_what_the_docstring_says_and_every_check_holds() -> None:
    trace = recorded()
    assert [r.namespace for r in trace.workload.requests] == ["a", "", "a", ""]
    assert check_engine(trace, CHECKS) == [] and "E23" in CHECKS
    first = {}
    for step in trace.steps:
        for seq in step.scheduled:
            first.setdefault(seq.name, (step.step, seq.num_cached))
    assert first == {"r1": (1, 0), "r2": (3, 0), "r3": (5, 4), "r4": (7, 4)}
    assert NAMESPACE_APART in observe(trace)


def test_e23_fires_on_a_hit_across_namespaces_and_not_within_one() -> None:
    """r3 in the shared namespace would read r1's KV (namespace "a"): E23, naming both, and
    E2 and E7 are quiet (the KV is right, the isolation is not). r2 and r4 both in "b":
    r4 reads r2's, of its own namespace."""
    found = check_engine(spaced(recorded(), r3=""), CHECKS)
    assert [(v.check, v.step, v.seq_ids) for v in found] == [("E23", 5, ("r3", "r1"))]
    assert "written at step 1 in namespace 'a'" in found[0].message
    assert check_engine(spaced(recorded(), r2="b", r4="b"), CHECKS) == []


def test_a_namespace_round_trips_is_checked_and_is_refused_where_not_driven() -> None:
    w = recorded().workload
    assert EngineWorkload.from_json(w.to_json()) == w
    bad = replace(w, requests=(replace(w.requests[0], namespace="a b"), *w.requests[1:]))
    assert any("namespace 'a b'" in p for p in bad.problems(1))
    assert "cache namespaces, which this engine's adapter does not drive" in " ".join(
        unsupported(w, PLAIN, ("normal",))
    )
    assert unsupported(w, SGLANG.features, ("overlap", "normal")) == []


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_namespaces_are_drawn_only_where_the_engine_has_them(data: st.DataObject) -> None:
    sglang = data.draw(engine_workloads(features=SGLANG.features))
    assert all(r.namespace in ("", "a", "b") for r in sglang.requests)
    # a prompt carrying embeddings: never in a workload that drafts, nor a session's
    assert not any(r.embeds and (sglang.drafts or r.session) for r in sglang.requests)
    plain = data.draw(engine_workloads(features=PLAIN))
    assert not any(r.namespace or r.embeds for r in plain.requests)
    assert NAMESPACE_APART in labels(SGLANG.features) and NAMESPACE_APART not in labels(PLAIN)


def test_e23_follows_kv_through_an_offloading_tier() -> None:
    """vLLM's offloading run (tests/engine_subjects/vllm/offload_trace.json): r3's block is
    stored to the tier, and r4 loads it back at step 6 and starts over it at step 7. With
    r3 in namespace "a" and r4 in the shared one, r4 reads r3's KV through the tier: E23;
    both in "a": quiet."""
    offload = EngineTrace.from_dict(
        json.loads((TRACE.parent.parent / "vllm" / "offload_trace.json").read_text())
    )
    (v,) = check_engine(spaced(offload, r3="a"), CHECKS)
    assert (v.check, v.step, v.seq_ids) == ("E23", 7, ("r4", "r3"))
    assert check_engine(spaced(offload, r3="a", r4="a"), CHECKS) == []


def embedded(trace: EngineTrace, *names: str) -> EngineTrace:
    """The trace with the named requests' prompts carrying embeddings of their own."""
    w = trace.workload
    requests = tuple(replace(r, embeds=r.name in names) for r in w.requests)
    return replace(trace, workload=replace(w, requests=requests))


def test_e23_reads_a_prompt_carrying_embeddings_as_a_namespace_of_its_own() -> None:
    """r3 reads r1's KV (both in namespace "a"): with r1's prompt carrying embeddings that
    KV is not r3's to read (SGLang's `skip_radix_cache_insert`), nor with r3's (its match
    skipped); E23 fires, naming it; so with r2's, which r4 reads. Without embeddings the
    run holds (test_the_recorded_run_is_what_the_docstring_says_and_every_check_holds; the
    release on workloads that carry them: tests/engine/test_sglang_embeds.py)."""
    for who, pair in (("r1", ("r3", "r1")), ("r3", ("r3", "r1")), ("r2", ("r4", "r2"))):
        found = check_engine(embedded(recorded(), who), CHECKS)
        assert [(v.check, v.seq_ids) for v in found] == [("E23", pair)]
        assert "embeddings of its own" in found[0].message
    w = embedded(recorded(), "r2").workload
    assert EngineWorkload.from_json(w.to_json()) == w
    assert "prompts carrying embeddings, which this engine's adapter does not drive" in " ".join(
        unsupported(w, PLAIN, ("normal",))
    )
    assert EMBEDS_APART in labels(SGLANG.features) and EMBEDS_APART not in labels(PLAIN)
    assert EMBEDS_APART in observe(embedded(recorded(), "r1"))
