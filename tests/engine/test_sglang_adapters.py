"""SGLang serving LoRA adapters (`--enable-lora`, `--max-loras-per-batch`, a request's
`lora_id`), its admission asking its own `LoRAManager.validate_lora_batch`: a batch runs
at most that many adapters, the base model one of them (E25), and a request reads cached
KV only of its own adapter (E23); the mutants of both, and the collision of SGLang's key
(docs/findings.md, SGLANG-08)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from schedcheck.engine.adapters import step_adapters
from schedcheck.engine.checks import check_engine
from schedcheck.engine.command import drawn
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.search import search_engine
from schedcheck.engine.sglang.adapter import ADAPTER as SGLANG
from schedcheck.engine.sglang.build import keyed
from schedcheck.engine.strategies import ADAPTERS_FULL
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from tests.engine.test_sglang import CHECKS, LOOPS, build, run_patched
from tests.engine.test_sglang import sglang as sglang  # the module's engine fixture
from tests.engine_subjects.sglang.mutants import ADAPTER_MUTANTS, SglangMutant

pytestmark = pytest.mark.sglang


def served(slots: int, loop: str) -> EngineWorkload:
    """r1 under adapter x, then r2 (the base model, r1's prompt) and r3 (adapter y) at step
    2, on a server of `slots` adapters at once."""
    return EngineWorkload(
        EngineConfig(40, 1, 3, 8, mode=loop, max_adapters=slots),
        (
            EngineRequest("r1", (1, 2, 1, 2), 4, adapter="x"),
            EngineRequest("r2", (1, 2, 1, 2), 4, arrival=2),
            EngineRequest("r3", (1, 2, 1, 1), 4, arrival=2, adapter="y"),
        ),
        2,
    )


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("slots", [1, 2])
def test_a_step_runs_as_many_adapters_as_served_and_none_shares_kv(
    sglang: LocalEngine, loop: str, slots: int
) -> None:
    build(sglang).patch = None
    trace = sglang.run(served(slots, loop))
    assert trace.failure is None and check_engine(trace, CHECKS) == []
    counts = [len(step_adapters(trace, s)) for s in trace.steps if s.scheduled]
    assert max(counts) == slots  # the base model counted (Traits.base_is_adapter)
    first = next(q for s in trace.steps for q in s.scheduled if q.name == "r2")
    assert first.num_cached == 0  # r1's [1 2 1 2] is adapter x's, not the base model's


@pytest.mark.parametrize("mutant", ADAPTER_MUTANTS, ids=[m.name for m in ADAPTER_MUTANTS])
@pytest.mark.parametrize("loop", LOOPS)
def test_each_adapter_mutant_is_caught_by_its_check(
    sglang: LocalEngine, mutant: SglangMutant, loop: str
) -> None:
    trace = run_patched(sglang, mutant.patch, served(1, loop))
    found = check_engine(trace, CHECKS)
    assert found and found[0].check == mutant.check, found


def test_the_release_passes_a_bounded_search_of_adapters(sglang: LocalEngine) -> None:
    """`--features adapters`: servers of one or two adapters, requests under either or the
    base model; a request is left waiting at the limit."""
    build(sglang).patch = None
    features = drawn(SGLANG.features, "adapters", "SGLang")
    found = search_engine(sglang, 300, CHECKS, True, features, LOOPS)
    assert found.failure is None, found.failure[1].report()
    assert found.reached[ADAPTERS_FULL] >= 10


def test_sglang_08_a_base_request_reads_an_adapter_s_kv_where_the_keys_meet(
    sglang: LocalEngine,
) -> None:
    """SGLang joins a request's LoRA id to its extra key by concatenation (`Req.__init__`):
    adapter "x" under extra key "b" and the base model under extra key "bx" are one key, so
    r2 (the base model) is served the KV r1 computed with its adapter (E23). With any other
    extra key it is not. (The adapter sends namespaces "b", "bx" and "d" as extra keys:
    build.keyed.)"""
    build(sglang).patch = None
    meet = EngineWorkload(
        EngineConfig(40, 1, 3, 8, mode="normal", max_adapters=2),
        (
            EngineRequest("r1", (1, 2, 1, 2), 4, namespace="b", adapter="x"),
            EngineRequest("r2", (1, 2, 1, 2), 4, arrival=3, namespace="bx"),
        ),
        2,
    )
    assert keyed("b")["extra_key"] == "b" and keyed("bx")["extra_key"] == "bx"
    found = check_engine(sglang.run(meet), CHECKS)
    assert found and found[0].check == "E23" and "adapter 'x'" in found[0].message
    apart = EngineWorkload(
        meet.config, (meet.requests[0], replace(meet.requests[1], namespace="d")), 2
    )
    assert check_engine(sglang.run(apart), CHECKS) == []
