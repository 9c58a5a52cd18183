"""SGLang serving prompts that carry embeddings of their own (`positional_embed_overrides`,
EngineRequest.embeds): such a request's KV is not its tokens' alone, so the radix tree
neither matches it (`init_next_round_input`) nor keeps it (`skip_radix_cache_insert`),
through chunked prefill's checkpoints too (`checkpoint_kv_cache`). E23 reads it as a
namespace of its own; the two mutants of the rule are caught."""

from __future__ import annotations

import pytest

from schedcheck.engine.checks import check_engine
from schedcheck.engine.command import drawn
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.search import search_engine
from schedcheck.engine.sglang.adapter import ADAPTER as SGLANG
from schedcheck.engine.strategies import EMBEDS_APART
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from tests.engine.test_sglang import CHECKS, LOOPS, build, run_patched
from tests.engine.test_sglang import sglang as sglang  # the module's engine fixture
from tests.engine_subjects.sglang.mutants import EMBEDS_MUTANTS, SglangMutant

pytestmark = pytest.mark.sglang

PROMPT = (1, 2, 1, 2, 3, 1)


def overridden(loop: str) -> EngineWorkload:
    """r1 carries embeddings, its prompt in two chunks (a budget of 4); r2 (plain, the same
    prompt) comes after r1 has finished; r3 (embeddings again) after r2; r4 (plain) last."""
    return EngineWorkload(
        EngineConfig(60, 1, 3, 4, mode=loop),
        (
            EngineRequest("r1", PROMPT, 3, embeds=True),
            EngineRequest("r2", PROMPT, 3, arrival=6),
            EngineRequest("r3", PROMPT, 3, arrival=11, embeds=True),
            EngineRequest("r4", PROMPT, 3, arrival=16),
        ),
        2,
    )


def _cached(trace: object, name: str) -> int:
    steps = trace.steps  # type: ignore[attr-defined]
    return next(q.num_cached for s in steps for q in s.scheduled if q.name == name)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_prompt_carrying_embeddings_reads_no_cached_kv_and_lends_none(
    sglang: LocalEngine, loop: str
) -> None:
    build(sglang).patch = None
    trace = sglang.run(overridden(loop))
    assert trace.failure is None and check_engine(trace, CHECKS) == []
    # r2 does not start over r1's KV, nor r3 over r2's; r4 over r2's (the tree keeps it)
    assert [_cached(trace, n) for n in ("r1", "r2", "r3")] == [0, 0, 0]
    assert _cached(trace, "r4") > 0


@pytest.mark.parametrize("mutant", EMBEDS_MUTANTS, ids=[m.name for m in EMBEDS_MUTANTS])
@pytest.mark.parametrize("loop", LOOPS)
def test_each_embeds_mutant_is_caught_by_e23(
    sglang: LocalEngine, mutant: SglangMutant, loop: str
) -> None:
    trace = run_patched(sglang, mutant.patch, overridden(loop))
    found = check_engine(trace, CHECKS)
    assert found and found[0].check == mutant.check, found
    assert "embeddings of its own" in found[0].message


def test_the_release_passes_a_bounded_search_of_embeds(sglang: LocalEngine) -> None:
    """`--features embeds`: a request in two of one workload in two carries embeddings,
    over the workloads' shared prompt stems."""
    build(sglang).patch = None
    features = drawn(SGLANG.features, "embeds", "SGLang")
    found = search_engine(sglang, 300, CHECKS, True, features, LOOPS)
    assert found.failure is None, found.failure[1].report()
    assert found.reached[EMBEDS_APART] >= 5
