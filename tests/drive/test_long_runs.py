"""Runs long enough to pass every small cap (issue 47, point 2): a workload that samples
(Workload.sample_every) is driven with the whole state copied at every sampled step and at
the end, the counters at every other call; it is judged by lockstep (R1) and the contract
(C1) alone, whatever checks are asked; its report lists neither its thousands of requests
nor two long queues whole; the marathon passes 2^16 steps, a thousand finished and a
thousand preempted on the reference."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings

from schedcheck import scheduler as reference
from schedcheck.drive.driver import run
from schedcheck.invariants.oracles import state_divergence
from schedcheck.model.trace import State, Update, counters
from schedcheck.model.wire import Reader, Writer, pack
from schedcheck.model.workload import Config, Request, Workload
from schedcheck.strategies.large import MARATHON_REQUESTS, MARATHON_STEPS, marathon
from schedcheck.verdict.report import describe_workload
from schedcheck.verdict.verify import SAMPLED, verify
from tests.catalogue import standalone

ROOT = Path(__file__).resolve().parent.parent.parent


def bursts(every: int = 3, count: int = 6, gap: int = 5) -> Workload:
    """Pairs of requests that preempt each other, a pair every `gap` steps."""
    requests = tuple(
        Request(f"r{k}.{i}", 1, 3, 1 + gap * k) for k in range(count) for i in range(2)
    )
    return Workload(Config(3, 1, 2, 2), requests, sample_every=every)


def test_a_sampling_workload_is_read_and_refused_as_plain_data() -> None:
    w = bursts()
    assert Workload.from_json(w.to_json()) == w and '"sample_every": 3' in w.to_json()
    assert "sample_every" not in dataclasses.replace(w, sample_every=0).to_json()
    for bad in (-1, 2.5, "3", True):
        with pytest.raises(ValueError, match=rf"sample_every must be .*got {bad!r}"):
            dataclasses.replace(w, sample_every=bad)  # type: ignore[arg-type]


def test_only_sampled_steps_and_the_end_are_copied_whole() -> None:
    w = bursts()
    trace = run(reference, w)
    assert trace.failure is None
    whole = [s.number for s in trace.steps if not s.scheduled.light()]
    assert whole and all(n % 3 == 0 for n in whole), whole
    assert all(s.update is not None for s in trace.steps)
    last = trace.steps[-1].last()
    assert not last.light() and len(last.finished) == len(w.requests)  # the end, whole
    # between samples the counters: the same as a run copying every state has them
    full = run(reference, dataclasses.replace(w, sample_every=0))
    assert len(full.steps) == len(trace.steps)
    for light, every in zip(trace.steps, full.steps, strict=True):
        assert light.schedule == every.schedule
        assert light.scheduled.num_preemptions == every.scheduled.num_preemptions
        assert light.update is not None and every.update is not None
        assert light.update.finished == every.update.finished
    assert last.num_preemptions > 0


def module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"sampled_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def test_a_sampling_run_is_judged_by_lockstep_and_the_contract_alone() -> None:
    """Every other check reads the states, which hold the counters alone between samples:
    asked for all of them, a correct file written otherwise passes (no false FAIL), and a
    history capped at 64 fails by R1 at a sampled step, where the whole state is compared."""
    w = bursts(every=8, count=40)
    assert verify(reference, w, lockstep=False).ok
    other = module(standalone(ROOT / "tests" / "equivalents" / "one_pass.py"))
    verdict = verify(other, w)
    assert verdict.ok, verdict.report()
    capped = module(standalone(ROOT / "tests" / "mutants" / "finished_history_capped.py"))
    failed = verify(capped, w)
    assert [v.check for v in failed.violations] == ["R1"], failed.report()
    assert failed.violations[0].step % 8 == 0 or failed.violations[0].step == len(
        failed.trace.steps
    )
    assert "finished holds 64 sequences; the reference's holds 6" in str(failed.violations[0])
    assert set(SAMPLED) == {"C1", "R1"}


def test_two_long_queues_are_told_apart_in_a_line() -> None:
    names = tuple(f"r{k}" for k in range(1025))
    want, have = counters(0, 0), counters(0, 0)
    want = dataclasses.replace(want, finished=names)
    have = dataclasses.replace(have, finished=names[1:])
    said = state_divergence(want, have)
    assert said == (
        "finished holds 1024 sequences; the reference's holds 1025; they differ first at 0: "
        "'r1', the reference's 'r0'"
    )
    assert state_divergence(want, want) == ""
    short = dataclasses.replace(want, finished=("a",))
    assert state_divergence(short, dataclasses.replace(want, finished=("b",))) == (
        "finished is ['b']; the reference has ['a']"
    )


def test_a_long_workload_is_described_by_its_first_requests() -> None:
    text = describe_workload(bursts(count=20))
    assert "r0.0 (prompt 1, max 3, step 1)" in text
    assert "... and 28 more (every one in the saved workload)" in text
    assert "the whole state compared every 3 steps and at the end" in text


@settings(max_examples=1, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(workload=marathon())
def test_a_marathon_passes_every_round_cap_on_the_reference(workload: Workload) -> None:
    trace = run(reference, workload)
    assert trace.failure is None
    last = trace.steps[-1].last()
    assert len(trace.steps) > MARATHON_STEPS > 1 << 16
    assert len(last.finished) == len(workload.requests) >= MARATHON_REQUESTS[0] > 1024
    assert last.num_preemptions > 1024
    assert isinstance(trace.steps[1].scheduled, State) and trace.steps[1].scheduled.light()


def test_idle_steps_travel_packed_and_come_back_as_they_were() -> None:
    """A long run's batch merges the steps where nothing happened (no arrival, nothing
    scheduled or finished, the counters unchanged) into runs; a step whose counters moved
    with nothing scheduled (a leak between calls) is never merged away."""
    workload = bursts(gap=15)
    trace = run(reference, workload)
    batch: list[object] = []
    writer = Writer()
    for step in trace.steps:
        pack(batch, writer.step(step))
    assert any(isinstance(item, dict) for item in batch)
    assert len(batch) < len(trace.steps)
    batch = json.loads(json.dumps(batch))  # as it travels
    reader = Reader(workload, len(trace.steps))
    assert [s for item in batch for s in reader.unpack(item)] == list(trace.steps)
    idle = next(s for s in trace.steps if not s.schedule and s.scheduled.light())
    leaked = dataclasses.replace(
        idle, update=Update((), (), counters(idle.scheduled.blocks_used + 1, 0))
    )
    mixed: list[object] = []
    writer = Writer()
    for step in (dataclasses.replace(idle, number=1), dataclasses.replace(leaked, number=2)):
        pack(mixed, writer.step(step))
    mixed = json.loads(json.dumps(mixed))
    reader = Reader(workload, 2)
    assert len(mixed) == 2
    assert [s for i in mixed for s in reader.unpack(i)][1].update == leaked.update
