"""E2 as an exported test states it (properties.kv_problem, issue 48): the KV a model leaves,
kept by the test across steps, read at each schedule(). Quiet on recorded runs of vLLM
0.34.0 where E2 is, firing where E2 fires on the same runs broken: a draft the runner did
not compute read back, and a block the prefix cache holds for a position nobody wrote
(VLLM-09's shape). No vLLM needed: the traces are plain data."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.export import fires, module_constants
from schedcheck.engine.trace import EngineStep, EngineTrace, Pool
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM

SUBJECTS = Path(__file__).resolve().parent.parent / "engine_subjects" / "vllm"
CHECKS = active(on=VLLM.policies_on)


def recorded(name: str) -> EngineTrace:
    return EngineTrace.from_dict(json.loads((SUBJECTS / name).read_text()))


def first_firing(trace: EngineTrace) -> list[int]:
    """The steps at which the property first fires, reading the trace as the test does."""
    constants = module_constants(trace)
    return [s.step for s in trace.steps if fires("E2", trace, s.step, constants)]


def e2(trace: EngineTrace) -> list[int]:
    return [v.step for v in check_engine(trace, CHECKS) if v.check == "E2"]


def test_quiet_where_e2_is_on_every_recorded_run() -> None:
    """(A run with a KV connector or of a hybrid model is not exported, as
    export._exportable says: its loads and saves, or its other KV cache groups, move KV
    the test does not keep.)"""
    for name in sorted(p.name for p in SUBJECTS.glob("*trace.json")):
        trace = recorded(name)
        if trace.workload.connector or trace.workload.layers:
            continue
        assert e2(trace) == [] and first_firing(trace) == [], name


def test_a_draft_the_runner_did_not_compute_is_read_back_at_the_step_e2_names() -> None:
    """spec_async_trace.json: step 2 wrote r1's drafts as the runner kept them (the
    scheduler held -1s); written as another token, step 3 reads KV of another prefix."""
    trace = recorded("spec_async_trace.json")

    def wrong_draft(step: EngineStep) -> EngineStep:
        copies = tuple(
            c._replace(token_ids=(*c.token_ids[:-1], 3)) if v.name == "r1" and c.token_ids else c
            for v, c in zip(step.scheduled, step.copies, strict=True)
        )
        return replace(step, copies=copies)

    broken = replace(trace, steps=tuple(wrong_draft(s) if s.step == 2 else s for s in trace.steps))
    assert e2(broken)[:1] == [3]
    assert first_firing(broken) == [3]


def test_a_cached_block_over_a_position_nobody_wrote_fires_at_once() -> None:
    """trace.json: a block the prefix cache holds as a prefix longer than anything computed
    into it (VLLM-09: cached eagerly, its request preempted before the step ran) is a
    promise no slot keeps, whoever reads it later."""
    trace = recorded("trace.json")
    first = trace.steps[0]
    named = (9,) * trace.workload.config.block_size

    def promised(pool: Pool) -> Pool:
        block = next(b for b in range(len(pool.blocks)) if b not in pool.reserved)
        blocks = tuple(
            b._replace(hash=77, token_ids=named) if i == block else b
            for i, b in enumerate(pool.blocks)
        )
        return pool._replace(blocks=blocks, cache_index=(*pool.cache_index, (77, block)))

    assert first.after_postprocess is not None
    broken_step = replace(
        first,
        after_schedule=promised(first.after_schedule),
        after_postprocess=promised(first.after_postprocess),
    )
    broken = replace(trace, steps=(broken_step, *trace.steps[1:]))
    assert e2(broken)[:1] == [first.step]
    assert first_firing(broken) == [first.step]
