"""A run of schedcheck's own KV connector exported as a vLLM test (issue 50;
engine/vllm/export.py), on the recorded run of tests/engine/test_transfer_checks.py (vLLM
0.34.0, its store, loads, saves and a failed load under the fail policy): no vLLM needed to
write the test. That the written test runs, fails on a mutant and passes on the release is
tests/engine/test_export_vllm.py's (marked vllm), and findings/VLLM_13.py, VLLM_17.py and
VLLM_21.py are such tests.

- The connector is written into the test (StoreConnector over STORED, registered by the
  test's module path) and its worker played as the run played it (Transfers: each
  request's TRANSFER_STEPS and LOAD_FAILS).
- E7's test lets a request the engine failed for a failed load stop short, as check_e7
  does, read off the engine (`failed()`); an engine whose test cannot tell is refused.
- E8 is not exported where the test does not play what the workers receive (vLLM's).
"""

from __future__ import annotations

import dataclasses

import pytest

from schedcheck.engine.adapter import EngineSetup
from schedcheck.engine.export import export_test
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.verdict import EngineVerdict
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.invariants.violation import Violation
from tests.engine.recorded_runs import recorded as recorded_run

SETUP = EngineSetup(
    root="/nowhere",
    package="vllm",
    runner="v2",
    runner_from="the test",
    modes=("sync-v2",),
)


def recorded() -> EngineTrace:
    return recorded_run("connector_trace.json")


def exported(trace: EngineTrace, check: str, step: int) -> str:
    verdict = EngineVerdict(trace, [Violation(check, step, "end of run", "as the test says")])
    rendered = VLLM.render(SETUP, trace)
    assert not isinstance(rendered, str), rendered
    return export_test(verdict, rendered, "vLLM", "schedcheck engine --engine vllm")


def test_the_connector_and_its_worker_are_written_into_the_test() -> None:
    trace = recorded()
    w = trace.workload
    text = exported(trace, "E5", len(trace.steps))
    compile(text, "exported.py", "exec")
    assert "class StoreConnector(KVConnectorBase_V1):" in text
    assert 'kv_connector="StoreConnector", kv_connector_module_path=__name__' in text
    assert "core.worker = Transfers()" in text and "class Offload" not in text
    assert f"STORED = {[list(p) for p in w.stored]!r}" in text
    steps = {r.name: (r.load, r.save, r.lookup_wait) for r in w.requests}
    assert f"TRANSFER_STEPS = {steps!r}" in text
    assert "LOAD_FAILS = {'r5': (0,)}" in text and "LOAD_FAILURE = 'fail'" in text
    assert "schedcheck" not in "".join(
        line for line in text.splitlines() if line.startswith(("import", "from"))
    )


def test_e7_lets_a_request_the_engine_failed_for_a_failed_load_stop_short() -> None:
    trace = recorded()
    text = exported(trace, "E7", len(trace.steps))
    assert "errored = failed(engine, requests)" in text
    assert "stopped = name in ABORTED or name in errored" in text
    assert "RequestStatus.FINISHED_ERROR" in text
    # under the recompute policy no request is failed: nothing stops short but an abort
    recompute = dataclasses.replace(trace.workload, load_failure="recompute")
    text = exported(dataclasses.replace(trace, workload=recompute), "E7", len(trace.steps))
    assert "errored" not in text and "stopped = name in ABORTED\n" in text


def test_e7_of_a_failing_load_is_refused_where_the_test_cannot_tell_a_failed_request() -> None:
    trace = recorded()
    rendered = VLLM.render(SETUP, trace)
    assert not isinstance(rendered, str)
    blind = dataclasses.replace(rendered, failed_body="")
    verdict = EngineVerdict(trace, [Violation("E7", len(trace.steps), "end of run", "x")])
    with pytest.raises(ValueError, match="may fail a request whose KV load fails"):
        export_test(verdict, blind, "vLLM", "schedcheck engine --engine vllm")


def test_e8_is_refused_where_the_test_does_not_play_what_the_workers_receive() -> None:
    trace = recorded()
    with pytest.raises(ValueError, match="E8 is not exported for this engine"):
        exported(trace, "E8", 2)
