"""The driver copies plain values out, and turns every contract breach into a C1 failure."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import replace
from types import ModuleType
from typing import Any

import pytest

from schedcheck import scheduler
from schedcheck.drive.driver import run
from schedcheck.invariants.checks import check_trace
from schedcheck.invariants.liveness import liveness_bound
from schedcheck.model.trace import SeqState, Trace
from schedcheck.model.workload import Request, Workload
from tests.workloads import EOS_SECOND, EXAMPLES

EX1 = EXAMPLES["example1"]


def patched(**methods: Callable[..., Any]) -> ModuleType:
    """The reference with some Scheduler methods replaced: a submission in three lines."""
    module = ModuleType("patched")
    module.__file__ = __file__  # the methods' code lives here: failures point into this file
    module.Sequence = scheduler.Sequence  # type: ignore[attr-defined]
    module.SequenceStatus = scheduler.SequenceStatus  # type: ignore[attr-defined]
    module.Scheduler = type("Scheduler", (scheduler.Scheduler,), methods)  # type: ignore[attr-defined]
    return module


def failure_of(impl: ModuleType, workload: Workload = EX1) -> tuple[int, str, str]:
    trace = run(impl, workload)
    assert trace.failure is not None, "the run did not fail"
    return trace.failure.step, trace.failure.call, trace.failure.message


def test_trace_copies_the_spec_table_of_example1() -> None:
    trace = run(scheduler, EX1)
    first = trace.steps[0]
    assert first.arrivals == ("a1", "a2", "a3")
    assert first.schedule == (("a1", 6), ("a2", 2))
    assert first.scheduled.seqs["a2"] == SeqState("RUNNING", 0, 5, 1, ())
    assert first.update is not None
    assert first.update.after.seqs["a2"] == SeqState("RUNNING", 2, 5, 1, ())
    assert first.update.after.waiting == ("a3",)
    assert [s.seq_id for s in first.update.samples] == ["a1"]
    assert len(trace.steps) == 3 and trace.failure is None


@pytest.mark.parametrize(
    "workload", [EX1, EOS_SECOND, replace(EXAMPLES["example2"], reupdate=True)]
)
def test_trace_and_workload_round_trip_through_json(workload: Workload) -> None:
    trace = run(scheduler, workload)
    assert Workload.from_json(workload.to_json()) == workload
    assert Trace.from_json(trace.to_json()) == trace


def test_failed_trace_round_trips_with_its_partial_step() -> None:
    trace = run(patched(update=lambda self: 1 / 0), EX1)
    assert trace.steps[0].update is None
    assert Trace.from_json(trace.to_json()) == trace


def test_idle_steps_until_a_late_arrival() -> None:
    late = replace(EX1, requests=(Request("a1", 2, 1, arrival=4),))
    trace = run(scheduler, late)
    assert [s.schedule for s in trace.steps] == [(), (), (), (("a1", 2),)]
    assert check_trace(trace) == []


def test_run_stops_at_the_liveness_bound() -> None:
    trace = run(patched(schedule=lambda self: {}), EX1)
    assert len(trace.steps) == liveness_bound(EX1) and trace.failure is None
    assert check_trace(trace, only=("L1",))[0].seq_ids == ("a1", "a2", "a3")


def test_exception_names_the_call_and_the_line() -> None:
    def schedule(self: Any) -> dict[str, int]:
        return {"a1": len(self.running[5:][0])}

    step, call, message = failure_of(patched(schedule=schedule))
    assert (step, call) == (1, "schedule()")
    assert message.startswith("raised IndexError: list index out of range (at line ")
    assert "in schedule: return {" in message


def test_sys_exit_is_a_failure_not_an_end() -> None:
    step, call, message = failure_of(patched(update=lambda self: sys.exit(0)))
    assert (step, call) == (1, "update()")
    assert message.startswith("raised SystemExit: 0 (at line ")


class LyingDict(dict):  # type: ignore[type-arg]
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("methods", "expected"),
    [
        ({"schedule": lambda self: LyingDict()}, "schedule() must return a dict, got LyingDict {}"),
        ({"schedule": lambda self: {1: 2}}, "schedule() returned a key 1 that is not a str"),
        ({"schedule": lambda self: {"a1": 2.0}}, "schedule()['a1'] must be an int, got float 2.0"),
        ({"schedule": lambda self: {"a1": True}}, "schedule()['a1'] must be an int, got bool True"),
        ({"update": lambda self: ()}, "update() must return a list, got tuple ()"),
    ],
)
def test_wrong_return_types_are_contract_failures(
    methods: dict[str, Callable[..., Any]], expected: str
) -> None:
    assert failure_of(patched(**methods))[2] == expected


def test_a_foreign_object_in_running_is_a_contract_failure() -> None:
    def schedule(self: Any) -> dict[str, int]:
        self.running.append(scheduler.Sequence("zz", 1, 1))
        return {}

    message = failure_of(patched(schedule=schedule))[2]
    assert message.startswith("Scheduler.running holds Sequence('zz'")
    assert message.endswith("which is not one of the sequences added")


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("status", "RUNNING", "a1.status must be a SequenceStatus member named WAITING"),
        ("output", (), "a1.output must be a list, got tuple ()"),
        ("output", [1.5], "every token in a1.output must be an int, got float 1.5"),
        ("num_blocks", None, "a1.num_blocks must be an int, got NoneType None"),
    ],
)
def test_ill_typed_sequence_fields_are_contract_failures(
    field: str, value: object, expected: str
) -> None:
    def schedule(self: Any) -> dict[str, int]:
        setattr(self.waiting[0], field, value)
        return {}

    assert failure_of(patched(schedule=schedule))[2].startswith(expected)


def test_sample_fn_misuse_is_reported_even_if_swallowed() -> None:
    def update(self: Any) -> list[Any]:
        with contextlib.suppress(Exception):  # hiding the error must not hide it from us
            self.sample_fn(object())
        return []

    step, call, message = failure_of(patched(update=update))
    assert (step, call) == (1, "update()")
    assert message.startswith("sample_fn was called with <object object")


def test_constructor_failure_is_reported_before_step_one() -> None:
    def init(self: Any, **kwargs: Any) -> None:
        raise TypeError("unexpected keyword argument 'num_blocks'")

    assert failure_of(patched(__init__=init))[:2] == (0, "Scheduler()")
