"""An engine's own offloading connector (issue 50; connector "offloading"), as the core
holds it: its worker played at the level of jobs (store.Jobs), E2 following KV through the
offload tier, E18 holding a job whose blocks the engine does not keep to no write before it
ends; on a run of vLLM 0.34.0's real Scheduler and OffloadingConnector recorded here
(tests/engine_subjects/vllm/offload_trace.json: plain data, no vLLM needed), quiet, and
broken one way at a time.

The recorded run (sync-v2, 7 blocks of 2, budget 4, a tier of 2 blocks): r1 ([1 2 1 1 1])
stores its first two blocks to tier blocks 0 and 1 (job 0, steps 1 to 2); r3 ([1 1])
finishes at step 3 and its block 5 is stored to tier block 1, evicting r1's second chunk
(job 1); at step 4 vLLM hands block 5 to r2 and flushes job 1 before the forward pass
writes it; r4 ([1 1], step 1) waits ("not yet": its prefix is being stored), then loads
tier block 1 into block 5 (job 2, steps 5 to 6) and computes its last token at step 7.
"""

from __future__ import annotations

import json
from dataclasses import replace

from schedcheck.engine.checks import check_engine
from schedcheck.engine.store import Jobs
from schedcheck.engine.strategies import (
    OFFLOAD_FLUSH,
    OFFLOAD_HIT,
    OFFLOAD_REUSED,
    OFFLOAD_STORE,
    observe,
)
from schedcheck.engine.trace import EngineStep, EngineTrace, Transfer
from schedcheck.engine.transfers import spans
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from tests.engine.recorded_runs import CHECKS, at, fired
from tests.engine.recorded_runs import recorded as recorded_run


def recorded() -> EngineTrace:
    return recorded_run("offload_trace.json")


def job(trace: EngineTrace, number: int) -> list[tuple[int, Transfer]]:
    return [(s.step, t) for s in trace.steps for t in s.transfers if t.remote and t.job == number]


def test_the_recorded_run_is_what_the_docstring_says_and_every_check_holds() -> None:
    trace = recorded()
    assert check_engine(trace, CHECKS) == []
    made = {s.start.job: (s.start.name, s.start.kind, s.started, s.ended) for s in spans(trace)}
    assert made == {0: ("r1", "save", 1, 2), 1: ("r3", "save", 3, 4), 2: ("r4", "load", 5, 6)}
    assert [t.remote for _, t in job(trace, 1)] == [(1,), (1,)]  # r1's chunk there evicted
    ((_, end),) = [(n, t) for n, t in job(trace, 1) if t.phase == "end"]
    assert end.at == "forward" and not end.held  # flushed: block 5 handed to r2 at step 4
    assert trace.steps[3].after_schedule.tables["r2"] == (4, 5)
    assert {OFFLOAD_STORE, OFFLOAD_HIT, OFFLOAD_FLUSH, OFFLOAD_REUSED} <= observe(trace)
    assert EngineTrace.from_dict(json.loads(json.dumps(trace.to_dict()))) == trace
    assert trace.outputs["r4"] == trace.workload.alone(trace.workload.requests[3])


def test_e2_reads_kv_through_the_tier_s_own_blocks() -> None:
    """r3's store written to tier block 0 instead (over r1's first chunk): tier block 1
    still holds r1's positions 2 and 3, which r4's load brings into block 5, and r4 reads
    them as its own positions 0 and 1."""

    def elsewhere(step: EngineStep) -> EngineStep:
        moved = tuple(
            t._replace(remote=(0,)) if t.job == 1 and t.remote else t for t in step.transfers
        )
        return replace(step, transfers=moved)

    broken = at(at(recorded(), 3, elsewhere), 4, elsewhere)
    found = fired(broken, "E2")
    assert found and found[0].step == 7, found
    assert "r4 attends to position 0" in found[0].message and "tier block 1" in found[0].message


def test_e18_holds_a_job_to_no_write_into_its_blocks_before_it_ended() -> None:
    """Job 1 (r3's store of block 5) ending with step 4's output, not before its forward
    pass: r2 computes into block 5 in that step while the job still reads it. Never
    ending: the same, and E19 says it was left running."""

    def reported(step: EngineStep) -> EngineStep:
        moved = tuple(
            t._replace(at="update") if t.job == 1 and t.phase == "end" and t.remote else t
            for t in step.transfers
        )
        return replace(step, transfers=moved)

    def lost(step: EngineStep) -> EngineStep:
        kept = tuple(
            t for t in step.transfers if not (t.job == 1 and t.phase == "end" and t.remote)
        )
        return replace(step, transfers=kept)

    for broken in (at(recorded(), 4, reported), at(recorded(), 4, lost)):
        found = fired(broken, "E18")
        assert found and found[0].step == 4, found
        assert "r2 computes into block 5 while r3's save job 1" in found[0].message
    assert fired(at(recorded(), 4, lost), "E19")


def test_the_worker_ends_a_job_at_a_step_s_start_flushed_synchronous_or_due() -> None:
    """store.Jobs: a synchronous load ends in the step that starts it, a flushed job in the
    step whose metadata flushes it (one it starts too), any other its request's steps after
    it started; a request's loads are reported done when the last of them is."""
    w = EngineWorkload(
        EngineConfig(8, 2, 2, 4),
        (EngineRequest("r1", (1, 2, 1), 2, load=2, save=3), EngineRequest("r2", (2,), 1)),
        2,
        connector="offloading",
        offload_blocks=4,
    )
    jobs = Jobs(w)

    def started(n: int, name: str, kind: str) -> Transfer:
        return Transfer(
            name, kind, "start", (1,), 0, (1, 2), job=n, remote=(n,), held=kind == "load"
        )

    jobs.begin(
        1, [started(0, "r1", "load"), started(1, "r1", "load"), started(2, "r2", "save")], sync=[1]
    )
    assert jobs.report(1).jobs == (1,)  # the synchronous load, before the forward pass
    jobs.begin(2, [started(3, "r2", "save")], flush=[2, 3])  # r2's store flushed twice
    done = jobs.report(2)
    assert sorted(done.jobs) == [2, 3] and not done.loaded
    jobs.begin(3, [])
    done = jobs.report(3)
    assert done.jobs == (0,) and done.loaded == ("r1",)  # its async load, after 2 steps
    ended = [t for t in jobs.drain() if t.phase == "end"]
    assert {t.at for t in ended} == {"forward"} and not jobs.busy


def test_an_offloading_workload_says_what_it_lacks_and_round_trips() -> None:
    config = EngineConfig(8, 2, 2, 4)
    plain = (EngineRequest("r1", (1, 2), 2, save=1),)
    w = EngineWorkload(config, plain, 2, connector="offloading", offload_blocks=3)
    assert w.problems() == []
    assert EngineWorkload.from_json(w.to_json()) == w
    no_tier = replace(w, offload_blocks=0).problems()
    assert any("an offload tier is the offloading connector's" in p for p in no_tier)
    stored = replace(w, stored=((1,),)).problems()
    assert any("stored prefixes under the offloading connector" in p for p in stored)
    failing = replace(w, requests=(replace(plain[0], load_fails=(0,)),)).problems()
    assert any("failing loads under the offloading connector" in p for p in failing)
    simulated = replace(w, connector="simulated").problems()
    assert any("offload_blocks 3 with connector 'simulated'" in p for p in simulated)


def test_e10_reads_no_step_that_starts_with_a_prefix_cache_reset() -> None:
    """r1, the head of the running list after step 3, is left waiting by step 4's
    schedule() and r2 runs: fcfs would have preempted r2, the tail, and E10 says so; where
    a reset opened step 4 it preempted both itself, and whom schedule() admits again is
    its waiting pass's (a request whose transfer is in flight is told "not yet")."""

    def head_left(step: EngineStep) -> EngineStep:
        pool = step.after_schedule
        status = {**pool.status, "r1": "WAITING"}
        running = tuple(n for n in pool.running if n != "r1")
        return replace(
            step,
            after_schedule=pool._replace(
                status=status, running=running, waiting=("r1", *pool.waiting)
            ),
        )

    broken = at(recorded(), 4, head_left)
    found = fired(broken, "E10")
    assert found and "fcfs preempts from its tail, r2" in found[0].message, found
    reset = replace(broken, workload=replace(broken.workload, resets=(4,)))
    assert fired(reset, "E10") == []


def test_connector_and_load_failure_options_narrow_what_is_drawn_or_name_what_is_not() -> None:
    """--connector and --load-failure keep those asked of what the run has; one it has not
    is a usage error naming the option and the value (exit 2, never a traceback: the
    command catches it after the release's setup too)."""
    import argparse

    import pytest

    from schedcheck.engine.command import narrowed
    from schedcheck.engine.vllm.adapter import ADAPTER as VLLM

    both = replace(VLLM.features, connectors=("simulated", "offloading"))
    asked = argparse.Namespace(connector="offloading", load_failure="fail")
    kept = narrowed(both, asked)
    assert kept.connectors == ("offloading",) and kept.load_failures == ("fail",)
    lacking = replace(VLLM.features, connectors=("simulated",))
    with pytest.raises(ValueError, match=r"--connector offloading: 'offloading' is not drawn"):
        narrowed(lacking, asked)
    none = argparse.Namespace(connector=None, load_failure="sometimes")
    with pytest.raises(ValueError, match=r"--load-failure sometimes: 'sometimes'"):
        narrowed(both, none)


def test_an_import_of_schedcheck_s_own_module_failing_in_a_call_is_ours_not_e6() -> None:
    """A call into the engine that fails importing one of schedcheck's modules (vLLM imports
    a connector by its module path while a Scheduler is built, in a box that hides what
    was not read before it) is schedcheck's fault, exit 3; any other ImportError is E6."""
    import pytest

    from schedcheck.engine.run import Run, Stop
    from schedcheck.faults import CheckerError

    class Driver:
        undrivable: tuple[type[BaseException], ...] = ()
        source = ""

    run = Run(recorded().workload, recorded().traits)
    run.driver = Driver()  # type: ignore[assignment]

    def ours() -> None:
        raise ModuleNotFoundError(
            "No module named 'schedcheck.engine.vllm.connector'",
            name="schedcheck.engine.vllm.connector",
        )

    def theirs() -> None:
        raise ModuleNotFoundError("No module named 'flashinfer'", name="flashinfer")

    with pytest.raises(CheckerError, match="schedcheck's own module"):
        run.call("Scheduler()", ours)
    with pytest.raises(Stop) as stopped:
        run.call("Scheduler()", theirs)
    assert stopped.value.failure.check == "E6"
