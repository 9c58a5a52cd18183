"""vLLM's streaming-input sessions (issue 50) on the installed release: a bounded search
passes with sessions in every mode (no max_model_len cap below a session's growth: with one,
the release livelocks, VLLM-14, whose replay fails where the ledger says) and reaches a
session continued and a chunk sent while its turn runs."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.search import search_engine
from schedcheck.engine.strategies import SESSION_CONTINUED, SESSION_QUEUED
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.engine.workload import EngineWorkload
from tests.engine.vllm_engine import local_vllm


def release_version() -> str:
    import vllm

    return str(vllm.__version__)


pytestmark = pytest.mark.vllm
FINDINGS = Path(__file__).resolve().parent.parent.parent / "findings"
CHECKS = active(frozenset(), VLLM.policies_on)
EVERY = argparse.Namespace(async_scheduling=None, runner=None, modes="all", features="sessions")


@pytest.fixture(scope="module")
def vllm() -> Iterator[LocalEngine]:
    yield from local_vllm(
        EVERY, lambda s: s.sessions, "this release has no streaming-input sessions (0.15 on)"
    )


def test_sessions_pass_a_bounded_search_in_every_mode(vllm: LocalEngine) -> None:
    setup = vllm.setup
    # one session a workload: two between turns can hold the pool between them (VLLM-15)
    features = replace(setup.features(VLLM.features), drafts=0, caps=False, sessions=1)
    assert features.sessions and not features.connectors
    found = search_engine(vllm, 600, CHECKS, True, features, setup.modes)
    assert found.failure is None, found.failure[1].report()
    for label in (SESSION_CONTINUED, SESSION_QUEUED):
        assert found.reached[label], f"never reached: {label}"


def test_vllm_14_livelocks_where_the_ledger_says(vllm: LocalEngine) -> None:
    """findings/VLLM_14.json (docs/findings.md): r1's chunk grows its sequence past
    max_model_len 2 while its turn has not ended: the running pass caps its next chunk at
    max_model_len - num_computed_tokens - 1 (0) and skips it, every step; nothing finishes
    it (vllm-project/vllm#42489, closed unfixed; PR #42502 open)."""
    saved = EngineWorkload.from_json((FINDINGS / "VLLM_14.json").read_text())
    trace = vllm.run(saved)
    found = check_engine(trace, CHECKS)
    assert found and found[0].check == "E5", found
    assert "r1" in found[0].message


def test_vllm_15_deadlocks_where_the_ledger_says(vllm: LocalEngine) -> None:
    """findings/VLLM_15.json (docs/findings.md): r1 and r2, sessions of one block each in a
    pool of two, each end a turn with a chunk queued: both wait with their blocks kept,
    each needs one more, nothing runs to preempt, nothing frees (PR #49439, open)."""
    saved = EngineWorkload.from_json((FINDINGS / "VLLM_15.json").read_text())
    trace = vllm.run(saved)
    found = check_engine(trace, CHECKS)
    assert found and (found[0].check, found[0].step) == ("E5", 4), found
    assert "the scheduler is stuck" in found[0].message


def test_a_session_s_arrival_time_is_its_latest_chunk_s_under_the_priority_policy(
    vllm: LocalEngine,
) -> None:
    """tests/engine_subjects/vllm/session_priority.json (a counterexample E10 gave before
    it knew this, saved): under the priority policy r1 and r2 (priority 2) are sessions,
    each sent a chunk at step 1, and r1 is preempted. vLLM compares their arrival_time,
    which becomes a session's latest chunk's once applied (`_update_request_as_session`),
    not the workload's arrival. E10 does not read the priority order where a candidate is
    a session sent a chunk (the trace does not place when it applied): quiet here."""
    subjects = Path(__file__).resolve().parent.parent / "engine_subjects" / "vllm"
    saved = EngineWorkload.from_json((subjects / "session_priority.json").read_text())
    trace = vllm.run(saved)
    assert check_engine(trace, CHECKS) == []
    assert any(
        s.after_schedule.status.get("r1") == "WAITING" and not s.after_schedule.tables["r1"]
        for s in trace.steps
    )  # r1 was preempted


def test_vllm_16_is_found_where_the_ledger_says(vllm: LocalEngine) -> None:
    """findings/VLLM_16.json (docs/findings.md): under async scheduling with the v1 runner a
    session's block hashes outlive the token its chunk replaced: block 1 stays cached as
    [1 2] holding [1 1]'s KV (vllm-project/vllm#49377). 0.25.0 fails it; 0.33.0 passes;
    0.34.0 has no async-v1 mode to replay it in."""
    saved = EngineWorkload.from_json((FINDINGS / "VLLM_16.json").read_text())
    if saved.config.mode not in vllm.setup.modes:
        pytest.skip(f"this release has no mode {saved.config.mode}")
    found = check_engine(vllm.run(saved), CHECKS)
    release = tuple(int(x) for x in release_version().split(".")[:2])
    if release < (0, 32):
        assert found and (found[0].check, found[0].step) == ("E2", 3), found
    else:
        assert found == [], found
