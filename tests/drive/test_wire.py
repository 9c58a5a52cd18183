"""The stream a worker sends its steps in (schedcheck/model/wire.py): every state as what
changed since the one before it, read back into the very trace the driver recorded, and
nothing a worker can send read as anything but a trace or a reply that is no trace."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from typing import Any

import pytest

from schedcheck import scheduler
from schedcheck.drive.driver import run, run_pair
from schedcheck.model.wire import Reader, Stream, Writer
from schedcheck.model.workload import Workload
from tests.drive.test_driver import patched
from tests.drive.test_long_runs import bursts
from tests.workloads import EOS_SECOND, EXAMPLES, PREEMPT_WITH_QUEUE

NOT_A_TRACE = (ValueError, TypeError, KeyError, IndexError)
WORKLOADS = [
    *EXAMPLES.values(),
    EOS_SECOND,
    PREEMPT_WITH_QUEUE,
    replace(EXAMPLES["example2"], reupdate=True),
]


def travelled(wires: list[Any]) -> list[Any]:
    return json.loads(json.dumps(wires))  # type: ignore[no-any-return]


def streamed(workload: Workload) -> list[Any]:
    writer = Writer()
    return travelled([writer.step(step) for step in run(scheduler, workload).steps])


@pytest.mark.parametrize("workload", WORKLOADS)
def test_a_stream_reads_back_as_the_trace_it_was_written_from(workload: Workload) -> None:
    trace = run(scheduler, workload)
    writer = Writer()
    wires = travelled([writer.step(step) for step in trace.steps])
    reader = Reader(workload, len(trace.steps))
    assert tuple(reader.step(wire) for wire in wires) == trace.steps


def test_a_failed_run_s_last_half_step_reads_back() -> None:
    workload = EXAMPLES["example1"]
    trace = run(patched(update=lambda self: 1 / 0), workload)
    assert trace.steps[-1].update is None
    writer = Writer()
    reader = Reader(workload, 10)
    assert [reader.step(w) for w in travelled([writer.step(s) for s in trace.steps])] == list(
        trace.steps
    )


def test_a_pair_s_two_streams_read_back_apart() -> None:
    first, second = EXAMPLES["example1"], EXAMPLES["example2"]
    traces = run_pair(scheduler, first, second)
    for trace in traces:
        writer = Writer()
        reader = Reader(trace.workload, len(trace.steps))
        wires = travelled([writer.step(s) for s in trace.steps])
        assert tuple(reader.step(w) for w in wires) == trace.steps


def test_only_what_changed_travels_and_what_did_not_is_shared() -> None:
    workload = PREEMPT_WITH_QUEUE
    trace = run(scheduler, workload)
    wires = streamed(workload)
    whole = sum(len(json.dumps(s.to_dict())) for s in trace.steps)
    assert len(json.dumps(wires)) < whole / 2
    reader = Reader(workload, len(wires))
    steps = [reader.step(w) for w in wires]
    ids = {r.seq_id: r.seq_id for r in workload.requests}
    for before, step in itertools.pairwise(steps):
        assert step.update is not None
        for seq_id, seq in step.scheduled.seqs.items():
            assert seq_id is ids[seq_id]  # the workload's own str: compared by identity
            if seq == before.last().seqs.get(seq_id):
                assert seq is before.last().seqs[seq_id]


def test_an_update_again_that_changes_nothing_is_the_state_before_it() -> None:
    workload = replace(EXAMPLES["example2"], reupdate=True)
    wires = streamed(workload)
    reader = Reader(workload, len(wires))
    for step in [reader.step(w) for w in wires]:
        assert step.update is not None and step.again is not None
        assert step.again.after is step.update.after


def forged() -> list[Any]:
    """Steps a worker could send that no driver writes: each must be no trace."""
    wires = streamed(EXAMPLES["example1"])
    good = wires[0]
    number, arrivals, schedule, scheduled, update, again = good
    change = scheduled[5][0]

    def state(**at: Any) -> list[Any]:
        fields = dict(enumerate(scheduled))
        fields.update({int(k[1:]): v for k, v in at.items()})
        return [fields[k] for k in sorted(fields)]

    def seq(k: int, value: Any) -> list[Any]:
        changed = list(change)
        changed[k] = value
        return state(f5=[changed])

    return [
        None,
        {},
        "step",
        [],
        good[:5],
        [*good, None],
        ["1", arrivals, schedule, scheduled, update, again],
        [1.5, arrivals, schedule, scheduled, update, again],
        [number, ["nobody"], schedule, scheduled, update, again],
        [number, [1], schedule, scheduled, update, again],
        [number, [[]], schedule, scheduled, update, again],
        [number, arrivals, ["a1"], scheduled, update, again],
        [number, arrivals, ["a1", "6"], scheduled, update, again],
        [number, arrivals, [1, 6], scheduled, update, again],
        [number, arrivals, schedule, [0], update, again],
        [number, arrivals, schedule, [0, 0, 0], update, again],
        [number, arrivals, schedule, ["0", 0], update, again],
        [number, arrivals, schedule, [True, 0.5], update, again],
        [number, arrivals, schedule, state(f0="1"), update, again],
        [number, arrivals, schedule, state(f2=["nobody"]), update, again],
        [number, arrivals, schedule, state(f2="a1"), update, again],
        [number, arrivals, schedule, state(f5={}), update, again],
        [number, arrivals, schedule, state(f5=[[]]), update, again],
        [number, arrivals, schedule, state(f5=[change[:6]]), update, again],
        [number, arrivals, schedule, seq(0, "nobody"), update, again],
        [number, arrivals, schedule, seq(0, ["a1"]), update, again],
        [number, arrivals, schedule, seq(1, "DONE"), update, again],
        [number, arrivals, schedule, seq(1, None), update, again],
        [number, arrivals, schedule, seq(2, 1.0), update, again],
        [number, arrivals, schedule, seq(4, "5"), update, again],
        [number, arrivals, schedule, seq(5, 1), update, again],
        [number, arrivals, schedule, seq(5, -1), update, again],
        [number, arrivals, schedule, seq(6, ["x"]), update, again],
        [number, arrivals, schedule, seq(6, 7), update, again],
        [number, arrivals, schedule, scheduled, [[], [], scheduled, 0], again],
        [number, arrivals, schedule, scheduled, [["nobody"], [], scheduled], again],
        [number, arrivals, schedule, scheduled, [[], ["a1", 0], scheduled], again],
        [number, arrivals, schedule, scheduled, [[], ["a1", 0, "1"], scheduled], again],
        [number, arrivals, schedule, scheduled, [[], ["nobody", 0, 1], scheduled], again],
        [number, arrivals, schedule, scheduled, 7, again],
    ]


@pytest.mark.parametrize("wire", forged())
def test_a_forged_step_is_no_trace(wire: Any) -> None:
    reader = Reader(EXAMPLES["example1"], 10)
    with pytest.raises(NOT_A_TRACE):
        reader.step(wire)


def test_a_queue_of_a_sequence_not_yet_added_is_no_trace() -> None:
    wires = streamed(EXAMPLES["example1"])
    scheduled = wires[0][3]
    scheduled[5] = [c for c in scheduled[5] if c[0] != "a3"]  # a3 in waiting, never added
    assert "a3" in scheduled[2] or "a3" in (scheduled[3] or [])
    with pytest.raises(NOT_A_TRACE):
        Reader(EXAMPLES["example1"], 10).step(wires[0])


@pytest.mark.parametrize(
    "item",
    [{"idle": [5, 0, 0, 0]}, {"idle": [5, 1 << 40, 0, 0]}, {"idle": [5, 1, 0]}, {"idle": 3}, {}],
)
def test_a_forged_idle_run_is_no_trace(item: Any) -> None:
    with pytest.raises(NOT_A_TRACE):
        list(Reader(EXAMPLES["example1"], 100).unpack(item))


def test_more_steps_than_the_run_can_have_are_no_trace() -> None:
    wires = streamed(EXAMPLES["example1"])
    reader = Reader(EXAMPLES["example1"], len(wires) - 1)
    with pytest.raises(NOT_A_TRACE):
        for wire in wires:
            reader.step(wire)


def late_bug(self: Any) -> Any:
    """The reference's update(), but its third one counts five preemptions that were not."""
    finished = scheduler.Scheduler.update(self)
    self.updates = getattr(self, "updates", 0) + 1
    if self.updates == 3:
        self.num_preemptions += 5
    return finished


@pytest.mark.parametrize("workload", WORKLOADS)
def test_a_stream_like_the_reference_s_is_its_steps(workload: Workload) -> None:
    reference = run(scheduler, workload)
    like = Stream.of(reference)
    reader = Reader(workload, len(reference.steps), like)
    steps = [reader.step(wire) for wire in streamed(workload)]
    assert tuple(steps) == reference.steps
    assert all(s is r for s, r in zip(steps, reference.steps, strict=True))


def test_a_stream_that_leaves_the_reference_s_is_read_as_it_goes() -> None:
    workload = PREEMPT_WITH_QUEUE
    reference = run(scheduler, workload)
    buggy = run(patched(update=late_bug), workload)
    assert buggy.steps[:2] == reference.steps[:2] and buggy.steps[2] != reference.steps[2]
    writer = Writer()
    wires = travelled([writer.step(s) for s in buggy.steps])
    reader = Reader(workload, len(wires), Stream.of(reference))
    steps = [reader.step(w) for w in wires]
    assert tuple(steps) == buggy.steps
    assert steps[0] is reference.steps[0] and steps[2] is not reference.steps[2]


def test_a_long_run_s_batches_like_the_reference_s_are_its_steps() -> None:
    workload = bursts(gap=15)
    reference = run(scheduler, workload)
    like = Stream.of(reference)
    assert any(type(item) is dict for item in like.items)  # idle runs packed
    reader = Reader(workload, len(reference.steps), like)
    steps = [s for item in travelled(like.items) for s in reader.unpack(item)]
    assert tuple(steps) == reference.steps
    alone = Reader(workload, len(reference.steps))
    assert [s for item in travelled(like.items) for s in alone.unpack(item)] == steps
