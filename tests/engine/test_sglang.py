"""SGLang's real scheduler under `schedcheck engine --engine sglang` (docs/engines.md,
"SGLang").

Marked `sglang`: they need SGLang installed (.ci/run installs the release pinned in
.ci/install-sglang, lean, in a venv of its own, and sets SCHEDCHECK_REQUIRE_SGLANG, so they
may not skip there); skipped elsewhere. The release fails E20 and E21 (SGLANG-01, and
SGLANG-02 and -03, in docs/findings.md: its own bugs), found by its default search;
with those two off it passes a bounded search in both its event loops, which reaches
retraction (its decode-pressure workloads) and everything else its features draw; each
mutant of the release made here (tests/engine_subjects/sglang/mutants.py) is caught by the
check it names, and SGLANG-01's fix makes its counterexample pass.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.search import search_engine
from schedcheck.engine.sglang.adapter import ADAPTER as SGLANG
from schedcheck.engine.sglang.config import sglang_setup
from schedcheck.engine.strategies import (
    DRAFTS_PREEMPTED,
    IN_FLIGHT_ABORT,
    PREEMPTION,
    REPREFILL,
    STREAMED_PREEMPTION,
    labels,
    observe,
)
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from tests.engine_subjects.sglang.mutants import MUTANTS, SglangMutant, retracted_exempt

pytestmark = pytest.mark.sglang
REQUIRE = "SCHEDCHECK_REQUIRE_SGLANG"
# the release's own bugs (SGLANG-01, E20; SGLANG-02, E21) off, so that the rest is seen
KNOWN = frozenset({"E20", "E21"})
CHECKS = active(KNOWN, SGLANG.policies_on)
LOOPS = ("overlap", "normal")
SUBJECTS = Path(__file__).resolve().parent.parent / "engine_subjects" / "sglang"


@pytest.fixture(scope="module")
def sglang() -> Iterator[LocalEngine]:
    if importlib.util.find_spec("sglang") is None:
        if os.environ.get(REQUIRE):
            pytest.fail(f"SGLang is not installed; {REQUIRE} is set, so these tests must run")
        pytest.skip("SGLang is not installed (.ci/run installs it: .ci/install-sglang)")
    every = sglang_setup(None, argparse.Namespace(loop=None, modes="all"))
    engine = LocalEngine(SGLANG, every)
    yield engine
    engine.stop()


def build(engine: LocalEngine) -> Any:
    """The SGLang build the engine drives (where the mutants patch the release)."""
    return engine.loaded.build


def run_patched(
    engine: LocalEngine, patch: Callable[[Any], None], workload: EngineWorkload
) -> EngineTrace:
    """The workload run on a Scheduler `patch` changed as it was built (a mutant, a fix),
    the build unpatched again after, however the run ended."""
    build(engine).patch = patch
    try:
        return engine.run(workload)
    finally:
        build(engine).patch = None


SLOTS = {1: 16, 2: 18}  # by page size: a pool where the third request does not fit


def retracting(loop: str, page: int) -> EngineWorkload:
    """Three requests of 8 tokens, none ending early, in a pool that holds two of them
    (pages of `page`) admitted under schedule_conservativeness 0.3: the decodes outgrow
    what admission reserved, and one is retracted."""
    blocks = SLOTS[page] // page + 1
    return EngineWorkload(
        EngineConfig(blocks, page, 3, 12, mode=loop, conservativeness=0.3),
        tuple(EngineRequest(f"r{i}", (1, 2, 1, i), 8) for i in (1, 2, 3)),
        2,
        eos_per_16=0,
    )


def test_the_release_passes_a_bounded_search_in_both_loops(sglang: LocalEngine) -> None:
    """With its two known bugs' checks off, no drafts (an abort before a verify sends a
    whole run past max_tokens, SGLANG-03 again: E7, tested below) and no sessions
    (SGLANG-06 and SGLANG-07: test_sglang_sessions); the search reaches
    retraction in one workload in ten or more, with a streamed output in one in twenty
    (issue 52)."""
    build(sglang).patch = None
    features = replace(SGLANG.features, drafts=0, sessions=0)
    found = search_engine(sglang, 1000, CHECKS, True, features, LOOPS)
    assert found.failure is None, found.failure[1].report()
    reachable = labels(features, LOOPS, sglang.setup.reaches)
    missed = [x for x in reachable if not found.reached[x]]
    assert not missed, f"never reached: {missed}"
    assert found.reached[PREEMPTION] >= 100 and found.reached[STREAMED_PREEMPTION] >= 50


def test_speculative_decoding_passes_a_bounded_search_without_client_aborts(
    sglang: LocalEngine,
) -> None:
    """Every feature but sessions (SGLANG-06, SGLANG-07), drafts among them (EAGLE in the
    normal loop, spec.py), with no abort sent by a client: SGLANG-03 is out of reach, and
    the rest passes; retraction with
    drafts scheduled the step before, and each outcome of a verify, are reached."""
    build(sglang).patch = None
    features = replace(SGLANG.features, aborts=False, sessions=0)
    found = search_engine(sglang, 1000, CHECKS, True, features, LOOPS)
    assert found.failure is None, found.failure[1].report()
    # (no abort a client sends: none lands with a batch in flight)
    reaches = tuple(x for x in sglang.setup.reaches if x != IN_FLIGHT_ABORT)
    reachable = labels(features, LOOPS, reaches)
    missed = [x for x in reachable if not found.reached[x]]
    assert not missed, f"never reached: {missed}"
    assert found.reached[DRAFTS_PREEMPTED] >= 20 and found.reached[PREEMPTION] >= 100


def test_sglang_03_with_drafts_sends_a_whole_run_past_max_tokens(sglang: LocalEngine) -> None:
    """SGLANG-03's shape with drafts (tests/engine_subjects/sglang/abort_spec_trace.json,
    read in test_sglang_spec_checks): the release runs it the same, fails E21, and E7
    with E21 off."""
    build(sglang).patch = None
    saved = EngineTrace.from_dict(json.loads((SUBJECTS / "abort_spec_trace.json").read_text()))
    trace = sglang.run(saved.workload)
    assert trace.outputs == saved.outputs == {"r1": (2, 2, 2, 1)}
    assert [v.check for v in check_engine(trace, active(on=SGLANG.policies_on))] == ["E21", "E7"]


def test_the_recorded_speculative_run_is_the_release_s(sglang: LocalEngine) -> None:
    """The run test_sglang_spec_checks reads, replayed on the release: the same steps."""
    build(sglang).patch = None
    saved = EngineTrace.from_dict(json.loads((SUBJECTS / "spec_trace.json").read_text()))
    trace = sglang.run(saved.workload)
    assert trace.failure is None and check_engine(trace, CHECKS) == []
    assert [s.scheduled for s in trace.steps] == [s.scheduled for s in saved.steps]
    assert trace.outputs == saved.outputs


def test_its_default_search_finds_its_known_bugs(sglang: LocalEngine) -> None:
    """Every check on: the first failure is SGLANG-02 (E21) or SGLANG-01 (E20), or in a
    session SGLANG-06 (E5) or SGLANG-07 (E2)."""
    build(sglang).patch = None
    found = search_engine(
        sglang, 300, active(frozenset(), SGLANG.policies_on), True, SGLANG.features, LOOPS
    )
    assert found.failure is not None
    verdict = found.failure[1]
    check = verdict.violations[0].check
    session = any(r.session for r in verdict.trace.workload.requests)
    assert check in KNOWN or (session and check in ("E5", "E2")), verdict.report()


@pytest.mark.parametrize("loop", LOOPS)
def test_sglang_01_a_retracted_request_refused_by_the_queue_limit(
    sglang: LocalEngine, loop: str
) -> None:
    """SGLANG-01's counterexample (recorded in the overlap loop) fails E20 on the release
    in both loops, and passes with PR #37260's fix applied (retracted requests exempt)."""
    saved = EngineTrace.from_dict(
        json.loads((SUBJECTS / "refused_after_retraction_trace.json").read_text())
    )
    workload = saved.workload
    workload = type(workload).from_dict(
        {**workload.to_dict(), "config": {**workload.to_dict()["config"], "mode": loop}}
    )
    every = active(frozenset(), SGLANG.policies_on)
    build(sglang).patch = None
    assert [v.check for v in check_engine(sglang.run(workload), every)][:1] == ["E20"]
    trace = run_patched(sglang, retracted_exempt, workload)
    assert trace.failure is None and check_engine(trace, every) == []
    assert PREEMPTION in observe(trace)


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("page", [1, 2])
def test_retraction_in_each_loop_holds_every_check(
    sglang: LocalEngine, loop: str, page: int
) -> None:
    build(sglang).patch = None
    trace = sglang.run(retracting(loop, page))
    assert trace.failure is None and check_engine(trace, CHECKS) == []
    assert {PREEMPTION, REPREFILL} <= observe(trace)


def test_a_worked_trace_what_the_driver_reads_off_sglang(sglang: LocalEngine) -> None:
    """r1 (5 tokens) is prefilled 4 then 1 under a budget of 4 (pages of 2); r2 arrives at
    step 3 and finds r1's first page, [1 2], in the radix tree: it starts at position 2 on
    the same page. Outputs equal each request's output alone."""
    build(sglang).patch = None
    workload = EngineWorkload(
        EngineConfig(16, 2, 2, 4, mode="normal"),
        (
            EngineRequest("r1", (1, 2, 1, 2, 1), 4, True),
            EngineRequest("r2", (1, 2, 1, 1), 3, True, arrival=3),
        ),
        2,
    )
    trace = sglang.run(workload)
    assert trace.failure is None and check_engine(trace, CHECKS) == []
    first, second, third = trace.steps[:3]
    assert [(s.name, s.num_cached, s.num_scheduled) for s in first.scheduled] == [("r1", 0, 4)]
    assert [(s.name, s.num_cached, s.num_scheduled) for s in second.scheduled] == [("r1", 4, 1)]
    assert first.after_schedule.reserved == (0,)  # page 0: SGLang's padding
    (r2,) = [s for s in third.scheduled if s.name == "r2"]
    assert r2.num_cached == 2 and r2.block_table[0] == first.scheduled[0].block_table[0]
    pool = third.after_postprocess
    assert pool is not None
    page = r2.block_table[0]
    assert pool.blocks[page].token_ids == (1, 2) and pool.blocks[page].ref_count == 2
    assert (pool.blocks[page].hash, page) in pool.cache_index
    assert trace.outputs == {r.name: workload.alone(r) for r in workload.requests}


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_each_mutant_of_the_release_is_caught_by_its_check(
    sglang: LocalEngine, mutant: SglangMutant
) -> None:
    """First on the retracting workloads, then by a search."""
    build(sglang).patch = mutant.patch
    try:
        for loop in LOOPS:
            violations = check_engine(sglang.run(retracting(loop, 1)), CHECKS)
            if violations:
                assert violations[0].check == mutant.check, violations
                return
        # no client aborts: the release's own SGLANG-03 with drafts (E7) is not found first;
        # no prompts carrying embeddings, which no mutant here touches: the draws as before
        # (with them, drafts_unverified's first workload is one E1 fires on before E7)
        features = replace(SGLANG.features, aborts=False, sessions=0, embeds=False)
        found = search_engine(sglang, 500, CHECKS, True, features, LOOPS)
    finally:
        build(sglang).patch = None
    assert found.failure is not None, f"{mutant.name} ({mutant.bug}) was not caught"
    assert found.failure[1].violations[0].check == mutant.check, found.failure[1].report()


def test_schedcheck_engine_sglang_runs_it_in_its_box(sglang: LocalEngine) -> None:
    """The command as a user runs it: SGLang imported and warmed up in its worker, before the
    box is entered, then searched; exit 0, the loop and the isolation said (every feature
    but sessions, where SGLANG-06 fails it fast)."""
    every = "policies,priority-preemption,priority-retraction,mixed,queue-limit,streams,"
    every += "pressure,namespaces,logprobs,adapters,spec"
    done = subprocess.run(
        [sys.executable, "-m", "schedcheck", "engine", "--engine", "sglang", "--examples", "40"]
        + [f"--off={check}" for check in sorted(KNOWN)]
        + ["--features", every],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS SGLang at" in done.stdout
    assert "loop: overlap (release default)" in done.stdout
    assert "checks: E1 E2 E3 E4 E5 E6 E7 E8 E11 E12 E14" in done.stdout
    assert "isolation: " in done.stdout
