"""E18, E19 and the connector's part of E2 and E7 (issue 50), on a run of vLLM 0.34.0's
real Scheduler with schedcheck's KV connector recorded here
(tests/engine_subjects/vllm/connector_trace.json: plain data, no vLLM needed), and on that
run broken one way at a time: each check stays quiet on the first and fires on its break.

The recorded run (mode sync-v2, 12 blocks of 2, budget 6, failed loads failing their
request): the store holds [1 2 1 2 1 1] from the start. r1 ([1 2 1 2 1]) loads all five
tokens asynchronously into blocks 1, 2, 3 (started at step 1, done at step 2) and is saved
when it finishes at step 5 (done at step 7); r2 ([1 2 1 1]) loads three synchronously at
step 1 and computes its last; r3 ([2 2 1]) has no hit and is saved at step 3 (done at step
4); r5 ([1 2 1 2], step 3) hits r2's block 4 locally, loads position 2 into block 9, which
fails: vLLM fails r5 (no output) and tells the connector at once; r4 ([1 2 1 2 1 2 1],
step 7) hits blocks 4 and 2 locally and loads position 4 from the store (r1's save, done
at that step's end, comes too late for it).
"""

from __future__ import annotations

import json
from dataclasses import replace

from schedcheck.engine.checks import check_engine
from schedcheck.engine.store import Store, Worker, garbage
from schedcheck.engine.strategies import (
    ASYNC_LOAD,
    DELAYED_FREE,
    EXTERNAL_HIT,
    LOAD_FAILED,
    observe,
)
from schedcheck.engine.trace import EngineStep, EngineTrace, Transfer
from schedcheck.engine.transfers import spans
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from tests.engine.recorded_runs import CHECKS, at, fired
from tests.engine.recorded_runs import recorded as recorded_run


def recorded() -> EngineTrace:
    return recorded_run("connector_trace.json")


def transfers(step: EngineStep, keep: object) -> EngineStep:
    return replace(step, transfers=tuple(t for t in step.transfers if keep(t)))  # type: ignore[operator]


def test_the_recorded_run_is_what_the_docstring_says_and_every_check_holds() -> None:
    trace = recorded()
    assert check_engine(trace, CHECKS) == []
    made = {(s.start.name, s.start.kind): (s.started, s.ended) for s in spans(trace)}
    assert made[("r1", "load")] == (1, 2) and made[("r1", "save")] == (5, 7)
    assert made[("r2", "load")] == (1, 1) and made[("r3", "save")] == (3, 4)
    failed = [t for s in trace.steps for t in s.transfers if t.failed]
    assert [(t.name, t.failed) for t in failed] == [("r5", (9,))]
    assert trace.outputs["r5"] == ()  # failed by the policy
    assert trace.outputs["r4"] == trace.workload.alone(trace.workload.requests[3])
    assert {EXTERNAL_HIT, ASYNC_LOAD, DELAYED_FREE, LOAD_FAILED.format("fail")} <= observe(trace)
    again = EngineTrace.from_dict(json.loads(json.dumps(trace.to_dict())))
    assert again == trace


def test_e18_fires_on_a_saved_block_freed_before_the_save_ends() -> None:
    """r1's save runs from step 5's update to step 7: its block 3 in the free queue at
    step 6 is a block the save still reads."""

    def freed(step: EngineStep) -> EngineStep:
        pool = step.after_schedule
        blocks = list(pool.blocks)
        blocks[3] = blocks[3]._replace(ref_count=0)
        return replace(
            step, after_schedule=pool._replace(blocks=tuple(blocks), free=(*pool.free, 3))
        )

    found = fired(at(recorded(), 6, freed), "E18")
    assert found and found[0].step == 6 and "block 3 is free" in found[0].message
    assert "r1's save" in found[0].message


def test_e18_fires_on_an_asynchronous_load_s_block_handed_to_another_request() -> None:
    """r1's load writes blocks 1, 2, 3 until step 2: block 2 in r2's table, or in the
    prefix cache's index, at step 1 is a block another request would read unloaded."""

    def shared(step: EngineStep) -> EngineStep:
        pool = step.after_schedule
        tables = {**pool.tables, "r2": (*pool.tables["r2"], 2)}
        return replace(step, after_schedule=pool._replace(tables=tables))

    found = fired(at(recorded(), 1, shared), "E18")
    assert found and "block 2 is in r2's block table" in found[0].message

    def cached(step: EngineStep) -> EngineStep:
        pool = step.after_schedule
        return replace(step, after_schedule=pool._replace(cache_index=(*pool.cache_index, (99, 2))))

    found = fired(at(recorded(), 1, cached), "E18")
    assert found and "prefix cache's index" in found[0].message


def test_e19_fires_on_request_finished_twice_or_never() -> None:
    trace = recorded()
    told = next(t for t in trace.steps[2].transfers if t.kind == "finished")

    def twice(step: EngineStep) -> EngineStep:
        return replace(step, transfers=(*step.transfers, told))

    found = fired(at(trace, 4, twice), "E19")
    assert found and "second time" in found[0].message and found[0].step == 4
    never = at(trace, 3, lambda s: transfers(s, lambda t: t.kind != "finished"))
    found = fired(never, "E19")
    assert found and "never told" in found[0].message


def test_e19_fires_on_a_transfer_never_ended_and_on_a_load_into_blocks_not_the_request_s() -> None:
    trace = recorded()
    unended = at(trace, 7, lambda s: transfers(s, lambda t: t.kind != "save"))
    found = fired(unended, "E19")
    assert found and "r1's save started at step 5 had not ended" in found[0].message

    def elsewhere(step: EngineStep) -> EngineStep:
        changed = tuple(
            t._replace(table=(1, 2, 7)) if t.name == "r1" and t.kind == "load" else t
            for t in step.transfers
        )
        return replace(step, transfers=changed)

    found = fired(at(trace, 1, elsewhere), "E19")
    assert found and "into block 7" in found[0].message and "holds block 3" in found[0].message


def test_e2_reads_what_a_load_brought_from_the_store() -> None:
    """r4 loads position 4 from the store, which holds [1 2 1 2 1 1] from the start: a
    store that held another prefix there leaves nothing of r4's in block 10, which r4
    reads at step 7."""
    trace = recorded()
    assert fired(trace, "E2") == []
    other = replace(trace, workload=replace(trace.workload, stored=((1, 2, 1, 2, 2, 1),)))
    found = fired(other, "E2")
    assert found and found[0].step == 7 and "r4 attends to position 4" in found[0].message
    assert "the store held no KV" in found[0].message


def test_e2_counts_a_failed_block_as_garbage_that_only_a_tainted_request_may_read() -> None:
    """r5's failed block 9: a request the runner says computed on it (tainted) is E7's to
    judge; one that read it untainted is E2's."""
    trace = recorded()

    def reads(step: EngineStep) -> EngineStep:
        seq = step.scheduled[0]
        r5 = seq._replace(
            name="r5", num_cached=3, num_scheduled=1, token_ids=(1, 2, 1, 2), block_table=(4, 9)
        )
        return replace(step, scheduled=(*step.scheduled, r5), copies=(*step.copies, step.copies[0]))

    found = fired(at(trace, 4, reads), "E2")
    assert found and "garbage: r5's load of it failed" in found[0].message
    tainted = at(at(trace, 4, reads), 4, lambda s: replace(s, tainted=("r5",)))
    assert fired(tainted, "E2") == []


def test_e7_excuses_a_request_failed_for_its_load_only_under_the_fail_policy() -> None:
    trace = recorded()
    assert fired(trace, "E7") == []
    recompute = replace(trace, workload=replace(trace.workload, load_failure="recompute"))
    found = fired(recompute, "E7")
    assert found and "r5 produced []" in found[0].message


def test_the_store_offers_what_it_holds_and_spares_computation() -> None:
    store = Store([(1, 2, 1, 2)])
    assert store.hit((1, 2, 1, 2, 1), 0, asynchronous=False) == 4
    assert store.hit((1, 2, 1, 2), 0, asynchronous=False) == 3  # its last left to compute
    assert store.hit((1, 2, 1, 2), 0, asynchronous=True) == 4  # the whole prompt
    assert store.hit((1, 2, 1, 2), 2, asynchronous=True) == 2  # past the local hit
    assert store.hit((1,), 0, asynchronous=True) == 0  # spares nothing: never offered
    assert store.hit((2, 2), 0, asynchronous=True) == 0
    store.add((2, 2, 2))
    assert store.hit((2, 2), 0, asynchronous=True) == 2


def test_the_worker_ends_transfers_when_their_plans_say_and_keeps_garbage() -> None:
    workload = EngineWorkload(
        EngineConfig(8, 2, 2, 4),
        (
            EngineRequest("a", (1, 2, 1), 2, load=2, load_fails=(1,)),
            EngineRequest("b", (1, 2), 2, save=1),
            EngineRequest("c", (1, 2, 1), 2),
        ),
        connector="simulated",
        stored=((1, 2, 1),),
    )
    worker = Worker(workload)
    load = Transfer("a", "load", "start", (1, 2), 0, (1, 2, 1))
    sync = Transfer("c", "load", "start", (5, 6), 0, (1, 2))
    worker.begin(3, [load, sync])
    assert worker.busy
    first = worker.report(3)  # c's sync load ends at once (nothing reported by name)
    assert first.loaded == () and first.failed_blocks == ()
    second = worker.report(4)
    assert second.loaded == ("a",) and second.failed_blocks == (2,)
    assert not worker.busy
    # block 2's slots hold garbage: a read of position 2 through it is garbage
    assert worker.computes((1, 2), 3, 1)
    assert not worker.computes((5, 6), 2, 1)
    assert garbage(1, 2) == 2 and garbage(2, 2) == 1 and garbage(1, 1) == 0


def test_a_workload_s_connector_fields_are_checked_and_round_trip() -> None:
    base = EngineWorkload(EngineConfig(8, 2, 2, 4), (EngineRequest("r1", (1, 2), 2, load=1),))
    assert any("without a connector" in p for p in base.problems())
    bad = replace(base, connector="nixl", load_failure="retry")
    problems = bad.problems()
    assert any("connector 'nixl'" in p for p in problems)
    assert any("load_failure 'retry'" in p for p in problems)
    good = replace(base, connector="simulated", stored=((1, 2),))
    assert good.problems() == []
    waits = replace(good, requests=(replace(good.requests[0], lookup_wait=9),))
    assert any("r1's lookup_wait 9 is not a count of steps" in p for p in waits.problems())
    good = replace(good, requests=(replace(good.requests[0], lookup_wait=2),))
    assert EngineWorkload.from_json(good.to_json()) == good


def test_e13_with_a_connector_excuses_only_a_request_the_free_blocks_cannot_hold() -> None:
    """r1 left out of step 4 (it decodes there): with eight blocks free it had room (E13);
    with none free vLLM would wait for blocks a transfer or a step in flight frees."""
    trace = recorded()

    def left_out(step: EngineStep) -> EngineStep:
        return replace(step, scheduled=(), copies=(), sampled=())

    found = fired(at(trace, 4, left_out), "E13")
    assert found and found[0].step == 4 and "r1 running, left out" in found[0].message

    def no_free(step: EngineStep) -> EngineStep:
        return replace(left_out(step), after_schedule=step.after_schedule._replace(free=()))

    assert fired(at(trace, 4, no_free), "E13") == []
