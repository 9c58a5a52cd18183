"""vLLM's cache salts and LoRA adapters on the installed release (EngineRequest.namespace as
`cache_salt`, EngineRequest.adapter as `lora_request` on a server of `max_loras`): its
block hasher keys a block by both (E23), its waiting pass keeps the running requests'
adapters within `max_loras`, the base model not counted (E25); the mutants of both; a
bounded search of both features."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import replace

import pytest

from schedcheck.engine.adapters import step_adapters
from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.command import drawn
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.search import search_engine
from schedcheck.engine.strategies import ADAPTERS_FULL, NAMESPACE_APART
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from tests.engine.vllm_engine import local_vllm
from tests.engine_subjects.vllm.mutants import KEY_MUTANTS, VllmMutant

pytestmark = pytest.mark.vllm
CHECKS = active(frozenset(), VLLM.policies_on)
EVERY = argparse.Namespace(async_scheduling=None, runner=None, modes="all", features=None)


@pytest.fixture(scope="module")
def vllm() -> Iterator[LocalEngine]:
    yield from local_vllm(EVERY, lambda s: True, "")


def served(slots: int, mode: str) -> EngineWorkload:
    """r1 under adapter x and salt a; r2 (the base model, no salt) and r3 (adapter y) at
    step 2, r4 (x, a) at step 4, all of r1's prompt, on a server of `slots` adapters."""
    return EngineWorkload(
        EngineConfig(40, 2, 3, 8, mode=mode, max_adapters=slots),
        (
            EngineRequest("r1", (1, 2, 1, 2), 4, adapter="x", namespace="a"),
            EngineRequest("r2", (1, 2, 1, 2), 4, arrival=2),
            EngineRequest("r3", (1, 2, 1, 2), 4, arrival=2, adapter="y"),
            EngineRequest("r4", (1, 2, 1, 2), 4, arrival=4, adapter="x", namespace="a"),
        ),
        2,
    )


def first(trace: EngineTrace, name: str) -> int:
    """The first position `name` was computed from."""
    return next(q.num_cached for s in trace.steps for q in s.scheduled if q.name == name)


@pytest.mark.parametrize("slots", [1, 2])
def test_salts_and_adapters_key_the_cache_and_bound_the_batch(
    vllm: LocalEngine, slots: int
) -> None:
    for mode in vllm.setup.modes:
        trace = vllm.run(served(slots, mode))
        assert trace.failure is None and check_engine(trace, CHECKS) == [], mode
        assert max(len(step_adapters(trace, s)) for s in trace.steps) == slots
        assert first(trace, "r2") == 0 and first(trace, "r3") == 0  # r1's is x's, under a
        assert first(trace, "r4") == 2  # its own adapter's and salt's: a block of r1's


@pytest.mark.parametrize("mutant", KEY_MUTANTS, ids=[m.name for m in KEY_MUTANTS])
def test_each_key_mutant_is_caught_by_its_check(vllm: LocalEngine, mutant: VllmMutant) -> None:
    vllm.loaded.build.patch = mutant.patch
    try:
        trace = vllm.run(served(1, vllm.setup.modes[0]))
    finally:
        vllm.loaded.build.patch = None
    found = check_engine(trace, CHECKS)
    assert found and found[0].check == mutant.check, found


def test_the_release_passes_a_bounded_search_of_salts_and_adapters(vllm: LocalEngine) -> None:
    features = drawn(vllm.setup.features(VLLM.features), "namespaces,adapters", "vLLM")
    found = search_engine(vllm, 300, CHECKS, True, features, vllm.setup.modes)
    assert found.failure is None, found.failure[1].report()
    assert found.reached[ADAPTERS_FULL] and found.reached[NAMESPACE_APART]


def test_a_hit_on_a_block_another_request_computes_in_the_same_step(vllm: LocalEngine) -> None:
    """vLLM caches a block as it is scheduled, so r5 ([1 1 1], adapter x) starts over the
    block r3 ([1 1], adapter x) computes in the same step: of its own adapter, E23 is quiet
    (it takes a step's writes before its reads, as E2 does); read as adapter y's, it fires."""
    w = EngineWorkload(
        EngineConfig(4, 2, 3, 3, mode="sync-v1", max_adapters=1),
        (
            EngineRequest("r1", (1,), 1),
            EngineRequest("r2", (1,), 1, adapter="y"),
            EngineRequest("r3", (1, 1), 1, adapter="x"),
            EngineRequest("r4", (1,), 1),
            EngineRequest("r5", (1, 1, 1), 1, adapter="x"),
        ),
        2,
    )
    mode = "sync-v1" if "sync-v1" in vllm.setup.modes else vllm.setup.modes[0]
    trace = vllm.run(replace(w, config=replace(w.config, mode=mode)))
    assert trace.failure is None and check_engine(trace, CHECKS) == []
    same = [
        s
        for s in trace.steps
        if {"r3", "r5"} <= {q.name for q in s.scheduled} and first(trace, "r5") == 2
    ]
    assert same, "r5 did not start over r3's block in r3's step"
    r5 = replace(w.requests[4], adapter="y")
    moved = replace(trace, workload=replace(trace.workload, requests=(*w.requests[:4], r5)))
    found = [v for v in check_engine(moved, CHECKS) if v.check == "E23"]
    assert found and found[0].seq_ids == ("r5", "r3")


def test_a_load_from_the_external_store_is_the_loader_s_own(vllm: LocalEngine) -> None:
    """A search's counterexample before E23 read transfers: r2 (namespace a) computes
    position 0 in block 1 and ends; r1 (the shared namespace) then loads position 0 from
    the simulated connector's store into that block and starts at 1. The store's prefixes
    are no request's, so what the load brought is r1's own: E23 quiet."""
    w = EngineWorkload(
        EngineConfig(2, 2, 1, 1, mode="sync-v1"),
        (
            EngineRequest("r1", (1, 1), 1, lookup_wait=1),
            EngineRequest("r2", (1,), 1, namespace="a"),
            *(EngineRequest(f"r{i}", (1,), 1) for i in (3, 4, 5)),
        ),
        1,
        connector="simulated",
        stored=((1,),),
        load_failure="fail",
    )
    modes = [m for m in vllm.setup.modes if m in ("async-v2", "sync-v1", "sync-v2")]
    trace = vllm.run(replace(w, config=replace(w.config, mode=modes[0])))
    loads = [t for s in trace.steps for t in s.transfers if t.kind == "load" and t.name == "r1"]
    assert loads and check_engine(trace, CHECKS) == []
