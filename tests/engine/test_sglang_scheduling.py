"""The checks of issue 52 (E20 a refusal only of a request that has not run, E21 nothing
streamed after an abort, E22 preemption for priority) and the labels of what a run
reached, on traces of SGLang 0.5.23's real scheduler recorded here (plain data in
tests/engine_subjects/sglang/: no SGLang needed), each check firing on a trace that breaks
it and quiet on one that keeps it.

The recorded runs (`*_trace.json`; workloads in the recorder's words):

- refused_after_retraction (overlap loop): 19 slots, two running, a queue limit of 1,
  schedule_conservativeness 0.1, r1 r2 r3 (prompt [1], 12 tokens each, streamed) arriving
  at steps 1 to 3. r3 waits; at step 12 r2 is retracted and SGLang requeues it through
  the entry new arrivals take, which finds the queue full: r2 is refused after 9 tokens
  were streamed (SGLANG-01).
- refused_arrival (normal loop): a queue limit of 1, three arrivals at step 1: r2 and r3
  are refused as they arrive, never run.
- abort_in_flight (overlap loop): r1 (prompt [1], one token) is prefilled at step 1; its
  abort is received at step 2, while that batch is in flight; SGLang processes the result
  after the abort and streams its token with the abort's finish (SGLANG-02).
- abort_waiting (overlap loop): one running request at a time; r2 is aborted at step 2,
  before it ran: nothing streamed.
- priority (normal loop): the priority policy, preempt_gap 0, one request at a time: r1
  (priority 2, streamed) runs; r2 (priority 0) arrives at step 3 and preempts it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings

from schedcheck.engine.adapter import PLAIN
from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.command import drawn, unsupported
from schedcheck.engine.sglang.adapter import ADAPTER as SGLANG
from schedcheck.engine.sglang.pools import Reader
from schedcheck.engine.strategies import (
    ABORT_WAITING,
    IN_FLIGHT_ABORT,
    PREEMPTION,
    PRIORITY,
    REFUSED,
    STREAMED_PREEMPTION,
    engine_workloads,
    observe,
)
from schedcheck.engine.trace import EngineStep, EngineTrace
from schedcheck.engine.workload import EngineRequest, EngineWorkload

SUBJECTS = Path(__file__).resolve().parent.parent / "engine_subjects" / "sglang"
CHECKS = active(frozenset(), SGLANG.policies_on)


def recorded(name: str) -> EngineTrace:
    return EngineTrace.from_dict(json.loads((SUBJECTS / f"{name}_trace.json").read_text()))


def fired(trace: EngineTrace) -> list[tuple[str, int]]:
    return [(v.check, v.step) for v in check_engine(trace, CHECKS)]


def with_step(trace: EngineTrace, step: int, **fields: object) -> EngineTrace:
    steps = list(trace.steps)
    steps[step - 1] = replace(steps[step - 1], **fields)  # type: ignore[arg-type]
    return replace(trace, steps=tuple(steps))


def with_config(trace: EngineTrace, **fields: object) -> EngineTrace:
    w = trace.workload
    return replace(trace, workload=replace(w, config=replace(w.config, **fields)))  # type: ignore[arg-type]


def test_the_traces_round_trip_and_say_what_their_runs_did() -> None:
    for name in ("refused_after_retraction", "refused_arrival", "abort_in_flight", "priority"):
        trace = recorded(name)
        assert EngineTrace.from_dict(json.loads(json.dumps(trace.to_dict()))) == trace
    retraction = recorded("refused_after_retraction")
    assert retraction.workload.config.max_queued == 1
    assert all(r.stream for r in retraction.workload.requests)
    twelfth: EngineStep = retraction.steps[11]
    assert twelfth.refused == ("r2",) and len(retraction.outputs["r2"]) == 9
    assert recorded("priority").workload.config.preempt_gap == 0


def test_e20_fires_on_a_retracted_request_refused_by_the_queue_limit() -> None:
    trace = recorded("refused_after_retraction")
    assert fired(trace) == [("E20", 12)]
    (violation,) = check_engine(trace, ["E20"])
    assert "after it ran, 9 output tokens already streamed" in violation.message
    assert REFUSED not in observe(trace)  # a refusal of a request that ran is no arrival's


def test_e20_is_quiet_on_arrivals_refused_by_a_full_queue() -> None:
    trace = recorded("refused_arrival")
    assert trace.steps[0].refused == ("r2", "r3")
    assert fired(trace) == []
    assert REFUSED in observe(trace)
    # the same refusals with no queue limit set: the engine refused on its own
    assert fired(with_config(trace, max_queued=0)) == [("E20", 1), ("E20", 1)]


def test_e7_lets_a_refused_request_stop_short_but_not_go_wrong() -> None:
    trace = recorded("refused_after_retraction")
    assert "E7" not in {v.check for v in check_engine(trace, ["E7"])}
    wrong = replace(trace, outputs={**trace.outputs, "r2": (1, *trace.outputs["r2"][1:])})
    assert [v.check for v in check_engine(wrong, ["E7"])] == ["E7"]


def test_e21_fires_on_a_token_streamed_after_the_abort_was_received() -> None:
    trace = recorded("abort_in_flight")
    assert fired(trace) == [("E21", 2)]
    assert IN_FLIGHT_ABORT in observe(trace)
    # the same run had the engine dropped the token in flight, as PR #37295 does
    quiet = with_step(trace, 2, streamed=())
    assert "E21" not in {c for c, _ in fired(quiet)}


def test_e21_is_quiet_on_an_abort_before_the_request_ran() -> None:
    trace = recorded("abort_waiting")
    assert fired(trace) == []
    assert ABORT_WAITING in observe(trace)
    # had the aborted request been sent a token at its abort's step, E21 fires
    loud = with_step(trace, 2, streamed=(("r2", 1),))
    assert ("E21", 2) in fired(loud)


def test_e22_is_quiet_on_a_preemption_for_a_better_priority() -> None:
    trace = recorded("priority")
    assert fired(trace) == []
    assert {PREEMPTION, PRIORITY, STREAMED_PREEMPTION} <= observe(trace)


def test_e22_fires_on_a_victim_not_worse_by_more_than_the_gap() -> None:
    trace = recorded("priority")
    w = trace.workload
    equal = replace(w, requests=tuple(replace(r, priority=0) for r in w.requests))
    assert fired(replace(trace, workload=equal)) == [("E22", 3)]
    # and where no preemption for priority is set at all
    assert fired(with_config(trace, preempt_gap=-1)) == [("E22", 3)]
    assert fired(with_config(trace, policy="fcfs")) == [("E22", 3)]


def test_e22_fires_on_a_worse_request_kept_running() -> None:
    """r3 (priority 5) added to the run as running beside r1 through step 3: r1 (2) is
    preempted while r3, worse, keeps running."""
    trace = recorded("priority")
    w = trace.workload
    r3 = EngineRequest("r3", (2, 2), 1, True, 1, 5)
    trace = replace(trace, workload=replace(w, requests=(*w.requests, r3)))
    before = trace.steps[1].after_postprocess
    now = trace.steps[2].after_schedule
    assert before is not None
    before = before._replace(running=(*before.running, "r3"))
    now = now._replace(status={**now.status, "r3": "RUNNING"})
    trace = with_step(with_step(trace, 2, after_postprocess=before), 3, after_schedule=now)
    assert ("E22", 3) in fired(trace)


def test_a_workload_of_these_fields_round_trips_and_bad_values_are_named() -> None:
    w = recorded("refused_after_retraction").workload
    back = EngineWorkload.from_json(w.to_json())
    assert back == w
    bad = replace(w, config=replace(w.config, policy="sjf", max_queued=-1, preempt_gap=-2))
    problems = bad.problems(1, SGLANG.features.headroom, 1, True)
    assert any("policy 'sjf'" in p for p in problems)
    assert any("max_queued -1" in p for p in problems)
    assert any("preempt_gap -2" in p for p in problems)


def test_an_engine_without_them_refuses_such_a_workload_on_replay() -> None:
    w = recorded("refused_after_retraction").workload
    said = unsupported(w, PLAIN, ("overlap",))
    assert "a queue limit, which this engine's adapter does not drive" in said
    assert "clients streamed token by token, which this engine's adapter does not drive" in said
    lpm = replace(w, config=replace(w.config, policy="lpm", max_queued=0))
    assert "the lpm policy, which this engine's adapter does not drive" in unsupported(
        lpm, PLAIN, ("overlap",)
    )
    assert unsupported(w, SGLANG.features, ("overlap", "normal")) == []


@settings(max_examples=200, deadline=None)
@given(w=engine_workloads(features=SGLANG.features, modes=("overlap", "normal")))
def test_every_workload_drawn_for_sglang_is_valid_input_for_it(w: EngineWorkload) -> None:
    """Its scheduling draws and decode pressure included: each request fits the pool as
    SGLang's intake counts it, the budget a whole number of pages, every field one its
    adapter drives; a pressure workload's pool holds its largest request."""
    features = SGLANG.features
    assert w.problems(features.reserved, features.headroom, 1, True) == []
    assert unsupported(w, features, ("overlap", "normal")) == []
    if w.config.preempt_gap >= 0:
        assert w.config.policy == "priority"


def test_features_names_each_scheduling_feature_and_refuses_one_the_engine_lacks() -> None:
    only = drawn(SGLANG.features, "mixed", "SGLang")
    assert only.mixed and not (only.policies or only.queue_limit or only.pressure)
    assert not (only.streams or only.preempt_gap)
    every = drawn(SGLANG.features, None, "SGLang")
    assert every.policies and every.pressure and every.queue_limit
    with pytest.raises(
        ValueError, match="--features queue-limit: schedcheck draws no queue limit for nano-vllm"
    ):
        drawn(PLAIN, "queue-limit", "nano-vllm")


def test_rows_problem_fires_on_kv_committed_past_the_row_allocated() -> None:
    """SGLang's physical rule on a live row (pools.Reader.rows_problem, after every step):
    quiet on committed <= allocated, firing past it; a leaked and a doubly free row too."""
    kv = SimpleNamespace(req_pool_idx=1, kv_allocated_len=4, kv_committed_len=4)
    req = SimpleNamespace(kv=kv, finished=lambda: False)
    rows = SimpleNamespace(free_slots=[2, 3], size=3)
    reader = Reader(SimpleNamespace(page_size=1, req_to_token_pool=rows), {"r1.": "r1"})
    assert reader.rows_problem({"r1": req}) is None
    kv.kv_committed_len = 5
    said = reader.rows_problem({"r1": req})
    assert said is not None and "r1 has KV committed to position 5" in said
    kv.kv_committed_len = 4
    rows.free_slots = [2]
    assert "row 3 of req_to_token is neither free nor held" in str(reader.rows_problem({"r1": req}))
    rows.free_slots = [2, 2, 3]
    assert "row 2 of req_to_token is free twice" in str(reader.rows_problem({"r1": req}))


def test_rows_problem_counts_a_session_s_row_between_its_turns() -> None:
    """A streaming session's slot holds its row while no turn runs (its turn finished):
    the row is held, not leaked, and SGLang's rule on it still fires."""
    turn = SimpleNamespace(kv=SimpleNamespace(req_pool_idx=None), finished=lambda: True)
    record = SimpleNamespace(req_pool_idx=1, kv_allocated_len=4, kv_committed_len=4)
    session = SimpleNamespace(slots={"s1": SimpleNamespace(kv=record)})
    rows = SimpleNamespace(free_slots=[2, 3], size=3)
    scheduler = SimpleNamespace(
        page_size=1, req_to_token_pool=rows, tree_cache=SimpleNamespace(session=session)
    )
    assert Reader(scheduler, {"s1.": "s1"}).rows_problem({"s1": turn}) is not None  # no session
    reader = Reader(scheduler, {"s1.": "s1"}, frozenset({"s1"}))
    assert reader.rows_problem({"s1": turn}) is None
    record.kv_committed_len = 5
    assert "s1 has KV committed to position 5" in str(reader.rows_problem({"s1": turn}))
