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
from schedcheck.model.tokens import TokenModel
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


def test_what_the_implementation_is_handed_is_equal_but_never_the_same_object() -> None:
    """An eos sampled by sample_fn and the eos_token_id the constructor got are two int
    objects, as in an engine; so are the seq_id it was given and the workload's (issue 38)."""
    seen: dict[str, list[Any]] = {"eos": [], "tokens": [], "ids": []}

    def init(self: Any, **kwargs: Any) -> None:
        seen["eos"].append(kwargs["eos_token_id"])
        scheduler.Scheduler.__init__(self, **kwargs)

    def add(self: Any, seq: Any) -> None:
        seen["ids"].append(seq.seq_id)
        scheduler.Scheduler.add(self, seq)

    def sampling(self: Any) -> list[Any]:
        sample = self.sample_fn
        self.sample_fn = lambda seq: seen["tokens"].append(sample(seq)) or seen["tokens"][-1]
        return scheduler.Scheduler.update(self)  # type: ignore[no-any-return]

    eos = 50256
    large = workload_with_eos(eos)
    trace = run(patched(__init__=init, add=add, update=sampling), large)
    assert trace.failure is None and trace.final() is not None
    assert seen["eos"] == [eos] and seen["eos"][0] is not large.config.eos_token_id
    sampled_eos = [t for t in seen["tokens"] if t == eos]
    assert sampled_eos and all(t is not seen["eos"][0] for t in sampled_eos)
    names = {r.seq_id: r.seq_id for r in large.requests}
    assert seen["ids"] == list(names) and all(s is not names[s] for s in seen["ids"])


def workload_with_eos(eos: int) -> Workload:
    """Two long-named requests, each sampling `eos` as its second token."""
    model = TokenModel(eos_at=(("req-1", 1), ("req-2", 1)))
    return replace(
        EX1,
        config=replace(EX1.config, eos_token_id=eos),
        requests=(Request("req-1", 3, 4), Request("req-2", 2, 4)),
        model=model,
    )


def test_a_default_argument_is_left_out_where_the_workload_says() -> None:
    """eos_token_id=None is the contract's default: a caller may leave it out, and a
    scheduler whose default is another value (0 here) runs as if eos were 0."""
    got: list[dict[str, Any]] = []

    def init(self: Any, **kwargs: Any) -> None:
        got.append(kwargs)
        scheduler.Scheduler.__init__(self, **{"eos_token_id": 0, **kwargs})

    zeros = replace(EX1, model=TokenModel(vocab_size=1))  # every token is 0
    for omit in (False, True):
        run(patched(__init__=init), replace(zeros, omit_defaults=omit))
    assert "eos_token_id" in got[0] and "eos_token_id" not in got[1]
    wrong_default = run(patched(__init__=init), replace(zeros, omit_defaults=True))
    assert wrong_default.failure is None
    assert [v.check for v in check_trace(wrong_default)][:1] == ["A1"]  # a token 0 ended one
    assert not check_trace(run(scheduler, replace(zeros, omit_defaults=True)))


def test_a_run_ends_once_an_output_runs_past_its_max_tokens() -> None:
    """It failed A1 already; each step more would grow the output to the liveness bound.
    L1 then says nothing: A1 names the end that was missed."""

    def ends(self: Any, seq: Any, token: int) -> bool:
        return len(seq.output) > seq.max_tokens + 5  # the bug: it runs on past max_tokens

    # a2 arrives late: the liveness bound is far beyond where a1 runs past its end
    one = replace(EX1, requests=(Request("a1", 3, 4), Request("a2", 1, 1, arrival=30)))
    trace = run(patched(_ends=ends), one)
    assert trace.failure is None
    assert len(trace.steps) < liveness_bound(one)
    assert len(trace.final().seqs["a1"].output) == 5  # type: ignore[union-attr]
    fired = [v.check for v in check_trace(trace)]
    assert fired[0] == "A1" and "L1" not in fired
