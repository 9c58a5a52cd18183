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
    SAVE_PREEMPTION,
    TRANSFER_ABORT,
)
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.engine.vllm.config import vllm_setup
from schedcheck.engine.workload import EngineWorkload
from tests.engine.vllm_engine import local_vllm

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
    assert features.connectors == ("simulated",)
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
    assert vllm_setup(None, EVERY).connectors == ("simulated",)


def test_vllm_17_is_found_where_the_ledger_says(vllm: LocalEngine) -> None:
    """findings/VLLM_17.json (docs/findings.md): under the priority policy 0.2x's waiting
    pass stops at a preempted request it cannot allocate for, before the request whose
    load is done (vllm-project/vllm#45388, #45406). 0.25.0 fails it; 0.33.0 passes; 0.34.0
    has no async-v1 mode to replay it in."""
    import vllm as release

    saved = EngineWorkload.from_json((FINDINGS / "VLLM_17.json").read_text())
    if saved.config.mode not in vllm.setup.modes:
        pytest.skip(f"this release has no mode {saved.config.mode}")
    found = check_engine(vllm.run(saved), CHECKS)
    if tuple(int(x) for x in release.__version__.split(".")[:2]) < (0, 31):
        assert found and (found[0].check, found[0].step) == ("E5", 8), found
    else:
        assert found == [], found
