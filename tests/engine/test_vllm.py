"""vLLM's own v1 scheduler under `schedcheck engine --engine vllm` (docs/engines.md, "vLLM").

Marked `vllm`: they need vLLM installed (.ci/run installs the release pinned in
.ci/vllm-requirements.txt and sets SCHEDCHECK_REQUIRE_VLLM, so they may not skip there);
skipped elsewhere. The release passes a bounded search; each mutant of it made here
(tests/engine_subjects/vllm/mutants.py) is caught by the check it names; a worked trace pins down
what the driver copies out of vLLM.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.search import search_engine
from schedcheck.engine.strategies import (
    DRAFTS_ALL,
    DRAFTS_FEW,
    DRAFTS_LOOKAHEAD,
    DRAFTS_NONE,
    DRAFTS_SOME,
    labels,
)
from schedcheck.engine.trace import UNDRIVABLE
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.engine.vllm.config import vllm_setup
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from tests.engine.vllm_engine import unkeyed
from tests.engine_subjects.vllm.mutants import MUTANTS, VllmMutant

pytestmark = pytest.mark.vllm
REQUIRE = "SCHEDCHECK_REQUIRE_VLLM"
FINDINGS = Path(__file__).resolve().parent.parent.parent / "findings"
CHECKS = active(frozenset(), VLLM.policies_on)


@pytest.fixture(scope="module")
def vllm() -> Iterator[LocalEngine]:
    if importlib.util.find_spec("vllm") is None:
        if os.environ.get(REQUIRE):
            pytest.fail(f"vLLM is not installed; {REQUIRE} is set, so these tests must run")
        pytest.skip("vLLM is not installed (.ci/run installs it: .ci/vllm-requirements.txt)")
    setup = vllm_setup(None)
    engine = LocalEngine(VLLM, setup)
    engine.use(VLLM.settle(setup, engine.run))  # the drafters the release runs in each mode
    yield engine
    engine.stop()


ONE = EngineRequest("r1", (1, 2), 2)


def release_modes() -> tuple[str, ...]:
    """Every mode the installed release has."""
    every = argparse.Namespace(async_scheduling=None, runner=None, modes="all")
    return vllm_setup(None, every).modes


def build(engine: LocalEngine) -> Any:
    """The vLLM build the engine drives (where the mutants patch the release)."""
    return engine.loaded.build


def test_the_release_passes_a_bounded_search_and_reaches_every_hard_part(
    vllm: LocalEngine,
) -> None:
    """In every mode the release has (--modes all), each drawn in turn."""
    build(vllm).patch = None
    every = vllm_setup(None, argparse.Namespace(async_scheduling=None, runner=None, modes="all"))
    # speculative decoding and the KV connector: the tests below; hybrid models: test_hybrid
    plain = replace(VLLM.features, drafts=0, connectors=(), load_failures=(), sessions=0, layers=())
    found = search_engine(vllm, 400, CHECKS, True, plain, every.modes)
    assert found.failure is None, found.failure[1].report()
    reachable = labels(plain, every.modes, every.reaches)
    missed = [label for label in reachable if not found.reached[label]]
    assert not missed, f"never reached: {missed}"


def test_speculative_decoding_passes_a_bounded_search_and_its_drafts_meet_every_fate(
    vllm: LocalEngine,
) -> None:
    """--features spec on the release: drafts drawn in every mode of it schedcheck drives
    them in (EngineSetup's draft_modes: every mode; async-v2, where it has it, the
    default of its servers), every check holds, and steps are reached whose drafts were all
    accepted, none, some, and decodes with fewer drafts than asked (padding included)."""
    build(vllm).patch = None
    asked = argparse.Namespace(async_scheduling=None, runner=None, modes="all", features="spec")
    every = VLLM.settle(vllm_setup(None, asked), vllm.run)  # its drafters, by trial runs
    assert vllm_setup(None).draft_modes  # drawn by default (issue 49), warmed up
    none = argparse.Namespace(async_scheduling=None, runner=None, modes=None, features="none")
    assert not vllm_setup(None, none).draft_modes  # --features none: none warmed up
    features = every.features(VLLM.features)
    assert features.drafts and features.draft_modes
    # every mode, the run's own first (an equal set was the same test, twice)
    assert set(features.draft_modes) == set(every.modes)
    # fcfs only: under the priority policy the search finds VLLM-09 (a request preempted
    # in the step that scheduled it leaves a block cached over a position never computed,
    # vllm-project/vllm#43569, open), which test_vllm_09_is_found_where_the_ledger_says
    # holds to its replay
    features = replace(features, priorities=False)
    found = search_engine(vllm, 400, CHECKS, True, features, every.modes)
    assert found.failure is None, found.failure[1].report()
    for label in (DRAFTS_ALL, DRAFTS_NONE, DRAFTS_SOME, DRAFTS_FEW, DRAFTS_LOOKAHEAD):
        assert found.reached[label], f"never reached: {label}"


def test_a_config_the_release_refuses_is_no_verdict(vllm: LocalEngine) -> None:
    """A draft model with 3 drafts under a budget of 3: 0.34 refuses the config (its budget
    must exceed the lookahead slots; 0.2x: leave a token after a row per max_num_seqs). The
    run is undrivable (a usage error naming the refusal), never E6."""
    build(vllm).patch = None
    mode = next(m for m in release_modes() if m.startswith("sync"))  # drafts driven there
    refused = EngineWorkload(
        EngineConfig(12, 2, 3, 3, mode=mode), (ONE,), 2, drafts=3, drafter="model"
    )
    failure = vllm.run(refused).failure
    assert failure is not None and failure.check == UNDRIVABLE, failure
    said = ("refuses this workload's config", "has no model drafter")  # 0.11: no draft models
    assert any(words in failure.message for words in said), failure.message


def test_a_draft_schedule_sets_each_step_s_drafts_by_its_batch_size(vllm: LocalEngine) -> None:
    """Dynamic draft lengths (0.33 on: num_speculative_tokens_per_batch_size): 2 drafts after
    a step of one request, none after a step of two. The simulated proposer drafts what
    the scheduler asks (num_spec_tokens_to_schedule), and each step's drafts are what the
    batch size of the step before gave; every check holds. A release without the field
    refuses the run (undrivable: not drawn there)."""
    build(vllm).patch = None
    mode = next(m for m in release_modes() if m.startswith("sync"))
    requests = (EngineRequest("r1", (1, 2), 6, True), EngineRequest("r2", (2, 1, 2), 6, True, 3))
    w = EngineWorkload(
        EngineConfig(12, 2, 2, 6, mode=mode),
        requests,
        2,
        drafts=2,
        draft_schedule=((1, 1, 2), (2, 2, 0)),
    )
    trace = vllm.run(w)
    if trace.failure is not None and "takes no draft schedule" in trace.failure.message:
        assert trace.failure.check == UNDRIVABLE
        return
    assert trace.failure is None and check_engine(trace, CHECKS) == []
    counts = []
    for before, step in zip(trace.steps, trace.steps[1:], strict=False):
        most = w.drafts_after(len(before.scheduled))
        for seq in step.scheduled:
            if seq.num_cached + seq.num_scheduled >= len(seq.token_ids):  # it decodes
                assert seq.drafts <= most, (step.step, seq)
                counts.append((len(before.scheduled), seq.drafts))
    assert {n for n, k in counts if k} == {1}  # drafts only after a step of one
    assert (2, 0) in counts  # and none after a step of two


def test_vllm_09_is_found_where_the_ledger_says(vllm: LocalEngine) -> None:
    """findings/VLLM_09.json (docs/findings.md): under the priority policy r2, scheduled a
    decode and a draft at step 5 (its allocation caches block 1, the prefix [1 2 2 2], as if
    position 3 were computed), is preempted later in the same schedule for r4; its blocks
    are freed with block 1 still findable by that hash, position 3 never written. E2 at
    step 5 on every release with the priority pass's preemption of a scheduled request
    (no fix released: vllm-project/vllm#43569 is open)."""
    build(vllm).patch = None
    saved = EngineWorkload.from_json((FINDINGS / "VLLM_09.json").read_text())
    if saved.config.mode not in release_modes():
        pytest.skip(f"this release has no mode {saved.config.mode}")  # before 0.21: no v2
    trace = vllm.run(saved)
    found = check_engine(trace, CHECKS)
    assert [(v.check, v.step) for v in found[:1]] == [("E2", 5)], found
    assert "the prefix [1 2 2 2], but its slot" in found[0].message


def test_a_worked_trace_what_the_driver_reads_off_vllm(vllm: LocalEngine) -> None:
    """r1 (5 tokens) gets 4 under a budget of 4, then its last; r2 arrives at step 2 and
    finds r1's first block ([1 2]) in the prefix cache: it starts at position 2 and shares
    block 1 with r1. Outputs equal each request's output alone."""
    build(vllm).patch = None
    workload = EngineWorkload(
        EngineConfig(8, 2, 2, 4),
        (
            EngineRequest("r1", (1, 2, 1, 2, 1), 4),
            EngineRequest("r2", (1, 2, 1, 1), 5, arrival=2),
        ),
        2,
    )
    trace = vllm.run(workload)
    assert trace.failure is None and check_engine(trace, CHECKS) == []
    first, second = trace.steps[0], trace.steps[1]
    assert [(s.name, s.num_cached, s.num_scheduled) for s in first.scheduled] == [("r1", 0, 4)]
    assert first.scheduled[0].block_table == (1, 2)  # block 0 is vLLM's null block
    assert first.after_schedule.reserved == (0,)
    assert [(s.name, s.num_cached, s.num_scheduled) for s in second.scheduled] == [
        ("r1", 4, 1),
        ("r2", 2, 2),
    ]
    assert second.scheduled[1].block_table[0] == second.scheduled[0].block_table[0] == 1
    # the runner's copy, built from the SchedulerOutputs alone, agrees (E8)
    assert second.copies[1].block_table == second.scheduled[1].block_table
    # block 1's hash names the prefix [1 2], and the prefix cache indexes it
    pool = second.after_postprocess
    assert pool is not None and pool.blocks[1].token_ids == (1, 2)
    assert (pool.blocks[1].hash, 1) in pool.cache_index
    assert trace.outputs == {r.name: workload.alone(r) for r in workload.requests}


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_each_mutant_of_the_release_is_caught_by_its_check(
    vllm: LocalEngine, mutant: VllmMutant
) -> None:
    modes = mutant.on(release_modes())
    if not modes:  # its protocol is gone from the release: a run in its mode is refused
        alone = EngineWorkload(EngineConfig(4, 2, 1, 2, mode=mutant.modes[0]), (ONE,), 2)
        refused = vllm.run(alone).failure
        assert refused is not None and refused.check == UNDRIVABLE, refused
        assert f"no {mutant.protocol} model runner" in refused.message, refused
        return
    build(vllm).patch = mutant.patch
    checks = [c for c in CHECKS if c not in mutant.off]
    try:
        features = vllm.setup.features(VLLM.features)  # the drafters it runs, settled
        features = features if mutant.drafts else replace(features, drafts=0)
        features = (
            replace(features, connectors=(mutant.connector,), load_failures=("fail",))
            if mutant.connector
            else replace(features, connectors=(), load_failures=())
        )
        features = (
            replace(features, caps=False, sessions=1)
            if mutant.sessions
            else replace(features, sessions=0)
        )
        if mutant.layers and not features.layers:
            pytest.skip("this release's planner lays out no hybrid model (Release.hybrid)")
        features = features if mutant.layers else replace(features, layers=())
        found = search_engine(vllm, 1000, checks, True, unkeyed(features), modes)
    finally:
        build(vllm).patch = None
    assert found.failure is not None, f"{mutant.name} ({mutant.bug}) was not caught"
    assert found.failure[1].violations[0].check == mutant.check, found.failure[1].report()


def test_schedcheck_engine_vllm_runs_it_in_its_box(vllm: LocalEngine) -> None:
    """The command as a user runs it: vLLM imported and configured in its worker, before the
    box is entered, then searched; exit 0 and the isolation said."""
    # (not the KV connector, which fails on CI's release under the recompute policy, as
    # VLLM-12 and VLLM-13 say: it runs in its box below, on VLLM-12's replay)
    command = [sys.executable, "-m", "schedcheck", "engine", "--engine", "vllm"]
    done = subprocess.run(
        [*command, "--examples", "40", "--features", "spec"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS vLLM at" in done.stdout
    assert "checks: E1 E2 E3 E4 E5 E6 E7 E8 E9 E10 E11 E12 E13" in done.stdout
    assert "isolation: " in done.stdout
    # schedcheck's connector imported in the worker before the box (vLLM imports it by its
    # module path when a Scheduler builds it: inside the box it could not be read)
    replay = FINDINGS / "VLLM_12.json"
    done = subprocess.run(
        [*command, "--features", "connector", "--async", "off", "--replay", str(replay)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "E8 at step 2" in done.stdout and "load starts" in done.stdout
