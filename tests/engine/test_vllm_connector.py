"""vLLM with schedcheck's KV connector (issue 50) on the installed release: a bounded search
passes under the fail policy (vLLM's default since 0.17) and reaches every transfer; the
two recompute-policy findings of the ledger fail where it says; --features connector is
refused by a release without a connector by module path, and warmed up only when drawn."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.search import search_engine
from schedcheck.engine.strategies import (
    ASYNC_LOAD,
    DELAYED_FREE,
    EXTERNAL_HIT,
    LOAD_FAILED,
    LOOKUP_WAIT,
    OFFLOAD_FLUSH,
    OFFLOAD_HIT,
    OFFLOAD_PREEMPTION,
    OFFLOAD_REUSED,
    OFFLOAD_STORE,
    SAVE_PREEMPTION,
    TRANSFER_ABORT,
)
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.engine.vllm.config import vllm_setup
from schedcheck.engine.workload import EngineWorkload
from tests.engine.vllm_engine import local_vllm


def release() -> tuple[int, ...]:
    import vllm

    return tuple(int(x) for x in str(vllm.__version__).split(".")[:2])


pytestmark = pytest.mark.vllm
FINDINGS = Path(__file__).resolve().parent.parent.parent / "findings"
CHECKS = active(frozenset(), VLLM.policies_on)
EVERY = argparse.Namespace(async_scheduling=None, runner=None, modes="all", features="connector")


@pytest.fixture(scope="module")
def vllm() -> Iterator[LocalEngine]:
    yield from local_vllm(
        EVERY, lambda s: bool(s.connectors), "this release registers no KV connector by module path"
    )


def test_the_connector_passes_a_bounded_search_under_the_fail_policy(vllm: LocalEngine) -> None:
    """Every mode, loads synchronous and not, saves, aborts, resets, preemption: every
    check holds, and every hard part of the transfers is reached."""
    setup = vllm.setup
    assert setup.load_failures == ("recompute", "fail")
    features = replace(setup.features(VLLM.features), drafts=0, load_failures=("fail",))
    assert features.connectors[0] == "simulated"
    features = replace(features, connectors=("simulated",))
    found = search_engine(vllm, 600, CHECKS, True, features, setup.modes)
    assert found.failure is None, found.failure[1].report()
    for label in (EXTERNAL_HIT, ASYNC_LOAD, LOAD_FAILED.format("fail"), DELAYED_FREE, LOOKUP_WAIT):
        assert found.reached[label], f"never reached: {label}"
    assert found.reached[TRANSFER_ABORT] or found.reached[SAVE_PREEMPTION]


@pytest.mark.parametrize(
    ("row", "check", "step", "words"),
    [
        ("VLLM_12", "E8", 2, "r1's pickled copy carries num_tokens 3, not 2"),
        ("VLLM_13", "E11", 4, "r2: num_output_placeholders is 1, but it has 0 token(s) in flight"),
    ],
)
def test_the_recompute_policy_findings_fail_where_the_ledger_says(
    vllm: LocalEngine, row: str, check: str, step: int, words: str
) -> None:
    """docs/findings.md, VLLM-12 (vllm-project/vllm#49250: the v2 runner keeps its own
    position over the scheduler's roll-back after a synchronous load failed) and VLLM-13
    (#45138: async scheduling's placeholder not reset with it): no released fix."""
    saved = EngineWorkload.from_json((FINDINGS / f"{row}.json").read_text())
    trace = vllm.run(saved)
    found = check_engine(trace, CHECKS)
    assert found and (found[0].check, found[0].step) == (check, step), found
    assert words in found[0].message


def test_features_connector_is_warmed_up_only_when_drawn(vllm: LocalEngine) -> None:
    none = argparse.Namespace(async_scheduling=None, runner=None, modes=None, features="spec")
    assert vllm_setup(None, none).connectors == ()
    # schedcheck's connector wherever the release registers one by module path; its own
    # offloading connector where that speaks the job protocol (0.2x on)
    drawn = vllm_setup(None, EVERY).connectors
    assert drawn[0] == "simulated" and set(drawn) <= {"simulated", "offloading"}
    import vllm as installed

    from schedcheck.engine.vllm.modes import release as read_release

    has = read_release(Path(installed.__file__).parent.parent)
    assert ("offloading" in drawn) == has.offloading


def test_vllm_17_is_found_where_the_ledger_says(vllm: LocalEngine) -> None:
    """findings/VLLM_17.json (docs/findings.md): under the priority policy the waiting pass
    stops at a preempted request it cannot allocate for, before the request whose load is
    done (vllm-project/vllm#45388, #45406). 0.25.0 fails it at step 8; on 0.26-0.29 VLLM-21's
    cascade comes first; 0.30.0 passes it (its deferred-free guard changes the timing: the
    stall remains, VLLM_17_030.json) and so do 0.31 on; 0.34.0 has no async-v1 mode."""
    saved = EngineWorkload.from_json((FINDINGS / "VLLM_17.json").read_text())
    if saved.config.mode not in vllm.setup.modes:
        pytest.skip(f"this release has no mode {saved.config.mode}")
    found = check_engine(vllm.run(saved), CHECKS)
    if release() < (0, 26):
        assert found and (found[0].check, found[0].step) == ("E5", 8), found
    elif release() < (0, 30):
        assert found and found[0].check == "E5", found
    else:
        assert found == [], found


def test_vllm_s_own_offloading_connector_passes_a_bounded_search(vllm: LocalEngine) -> None:
    """vLLM's OffloadingConnector with its CPU tier (the job protocol: where the release has
    it), every mode: stores, loads back from the tier, flushes of jobs whose blocks were
    handed on, a tier block evicted and stored over, preemptions while stores run: every
    check holds (0.25 to 0.32 fail VLLM-18 first; 0.2x's priority policy VLLM-03, E13)."""
    if "offloading" not in vllm.setup.connectors:
        pytest.skip("this release's offloading connector does not speak the job protocol")
    if release() < (0, 33):
        pytest.skip("0.25 to 0.32 fail VLLM-18 (test_vllm_18 below holds its replay)")
    features = replace(
        vllm.setup.features(VLLM.features), drafts=0, connectors=("offloading",), sessions=0
    )
    found = search_engine(vllm, 1000, CHECKS, True, features, vllm.setup.modes)
    assert found.failure is None, found.failure[1].report()
    for label in (OFFLOAD_STORE, OFFLOAD_HIT, OFFLOAD_FLUSH, OFFLOAD_REUSED, OFFLOAD_PREEMPTION):
        assert found.reached[label], f"never reached: {label}"


def test_vllm_18_crashes_where_the_ledger_says(vllm: LocalEngine) -> None:
    """findings/VLLM_18.json (docs/findings.md): a prefix-cache reset (its running requests
    preempted, the offload tier kept) preempts r5, which the same schedule() admits again
    with a load from the tier; the connector's flush of preempted requests' jobs asserts
    they are stores (`assert self._jobs[any_jid].is_store`): the engine core dies. 0.25 to
    0.32 fail it; 0.33 leaves the step's new loads out of the flush."""
    if "offloading" not in vllm.setup.connectors:
        pytest.skip("this release's offloading connector does not speak the job protocol")
    saved = EngineWorkload.from_json((FINDINGS / "VLLM_18.json").read_text())
    trace = vllm.run(saved)
    found = check_engine(trace, CHECKS)
    if release() < (0, 33):
        assert found and (found[0].check, found[0].step) == ("E6", 7), found
        assert "is_store" in found[0].message or "AssertionError" in found[0].message
    else:
        assert found == [], found


@pytest.mark.parametrize(
    ("row", "check", "step", "words", "fixed", "alone_from"),
    [
        # the engine core stops stepping while a save it delayed a free for still runs
        ("VLLM_19", "E19", 5, "r4's save started at step 4 had not ended", (0, 22), (0, 0)),
        # an asynchronous load's count rounded up to the blocks allocated
        (
            "VLLM_20",
            "E2",
            5,
            "r4 attends to position 1 at slot 5, which holds nothing",
            (0, 18),
            (0, 0),
        ),
        # the priority policy's waiting pass stops at a head it cannot allocate for (before
        # 0.30 VLLM-21's cascade comes first)
        ("VLLM_17_030", "E5", 14, "nothing scheduled while r2, r3, r5 wait", (0, 31), (0, 30)),
        # a preemption whose free is deferred frees nothing: the cascade drops all in flight
        ("VLLM_21", "E5", 112, "r1, r3, r4, r5 not finished after 111 steps", (0, 30), (0, 0)),
        # vLLM's offloading connector dies on the abort of a request never scheduled
        ("VLLM_22", "E6", 1, "in _build_store_jobs", (0, 27), (0, 0)),
    ],
)
def test_the_older_releases_connector_findings_fail_where_the_ledger_says(
    vllm: LocalEngine,
    row: str,
    check: str,
    step: int,
    words: str,
    fixed: tuple[int, int],
    alone_from: tuple[int, int],
) -> None:
    """findings/VLLM_19.json, VLLM_20.json, VLLM_17_030.json, VLLM_21.json and VLLM_22.json
    (docs/findings.md): each fails on the releases before its fix where it was replayed
    (0.17.1 and 0.21.0 for VLLM-19, 0.17.1 for VLLM-20, 0.29.0 and 0.30.0 for VLLM-17,
    0.29.0 for VLLM-21, 0.26.0 for VLLM-22), with its own words from `alone_from` on, and
    passes from its fix (0.25.0, 0.29.0, 0.30.0, 0.31.0, 0.34.0)."""
    saved = EngineWorkload.from_json((FINDINGS / f"{row}.json").read_text())
    if release() < {"VLLM_21": (0, 27), "VLLM_22": (0, 26)}.get(row, (0, 0)):
        pytest.skip(f"{row}'s code came later (docs/findings.md): not replayed here")
    if saved.connector not in vllm.setup.connectors or saved.config.mode not in vllm.setup.modes:
        pytest.skip(
            f"this release has no {saved.connector} connector or no mode {saved.config.mode}"
        )
    found = check_engine(vllm.run(saved), CHECKS)
    if release() < fixed:
        assert found and found[0].check == check, found
        if release() >= alone_from:
            assert found[0].step == step and words in found[0].message, found[0]
    else:
        assert found == [], found
