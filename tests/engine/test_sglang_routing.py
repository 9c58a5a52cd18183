"""SGLang's two policies that read no cache: `random` (the waiting queue shuffled each step,
the server's seed fixed, so a workload's run is the same every time) and `routing-key`
(waiting requests whose routing key the running batch holds most go first), on the
installed release."""

from __future__ import annotations

import pytest

from schedcheck.engine.checks import check_engine
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from tests.engine.test_sglang import CHECKS, build
from tests.engine.test_sglang import sglang as sglang  # the module's engine fixture

pytestmark = pytest.mark.sglang


def queued(policy: str) -> EngineWorkload:
    """Two running at most: r1 (key k1, 8 tokens) and r2 (k2, 2 tokens) from step 1; r3
    (k2) and r4 (k1) arrive at step 2, in that order, and wait for r2's slot."""
    return EngineWorkload(
        EngineConfig(40, 1, 2, 8, mode="normal", policy=policy),
        (
            EngineRequest("r1", (1, 2), 8, True, routing_key="k1"),
            EngineRequest("r2", (2, 1), 2, True, routing_key="k2"),
            EngineRequest("r3", (2, 2), 2, True, arrival=2, routing_key="k2"),
            EngineRequest("r4", (1, 1), 2, True, arrival=2, routing_key="k1"),
        ),
        2,
    )


def admitted(trace: EngineTrace) -> list[str]:
    """The requests in the order they were first computed."""
    order: list[str] = []
    for step in trace.steps:
        order.extend(q.name for q in step.scheduled if q.name not in order)
    return order


def test_routing_key_admits_the_key_the_running_batch_holds_first(sglang: LocalEngine) -> None:
    """When r2 ends, r1 (k1) runs alone: routing-key admits r4 (k1) before r3 (k2), which
    arrived first; fcfs admits r3 first."""
    build(sglang).patch = None
    keyed = sglang.run(queued("routing-key"))
    assert keyed.failure is None and check_engine(keyed, CHECKS) == []
    assert admitted(keyed) == ["r1", "r2", "r4", "r3"]
    assert admitted(sglang.run(queued("fcfs"))) == ["r1", "r2", "r3", "r4"]


def test_random_is_the_same_run_every_time(sglang: LocalEngine) -> None:
    build(sglang).patch = None
    first, again = sglang.run(queued("random")), sglang.run(queued("random"))
    assert first.failure is None and check_engine(first, CHECKS) == []
    assert [s.scheduled for s in first.steps] == [s.scheduled for s in again.steps]
