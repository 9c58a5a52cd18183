"""What a run produced: plain values copied out of the implementation at every step.

A trace never holds an implementation's objects, only str, int and tuples of them, so it
cannot change later, cannot lie about equality, and crosses a process boundary as JSON.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from schedcheck.faults import Failure
from schedcheck.model.workload import Workload


def show_schedule(schedule: dict[str, int]) -> str:
    """A schedule as the spec writes it: {a1: 6, a2: 2}."""
    return "{" + ", ".join(f"{s}: {n}" for s, n in schedule.items()) + "}"


class SeqState(NamedTuple):
    """One sequence as the snapshot saw it (a NamedTuple: snapshots are the hot path)."""

    status: str  # the status member's name: WAITING, RUNNING or FINISHED
    num_computed: int
    num_tokens: int
    num_blocks: int
    output: tuple[int, ...]


@dataclass(frozen=True)
class State:
    """The scheduler after one call: every added sequence, the three queues, the counters."""

    seqs: dict[str, SeqState]  # every sequence added so far, in arrival order
    waiting: tuple[str, ...]
    running: tuple[str, ...]
    finished: tuple[str, ...]
    blocks_used: int
    num_preemptions: int

    def overrun(self, max_tokens: dict[str, int]) -> bool:
        """Whether some sequence's output is longer than its `max_tokens`: it missed its
        end (A1 at the update() that reached it), and every step after only grows it."""
        return any(len(s.output) > max_tokens[k] for k, s in self.seqs.items())

    def light(self) -> bool:
        """Its counters alone: a long run's state between samples (or an empty scheduler's)."""
        return not self.seqs and not self.waiting and not self.running and not self.finished

    def to_dict(self) -> dict[str, Any] | list[int]:
        if self.light():
            return [self.blocks_used, self.num_preemptions]  # counters alone: a long run's
        return {
            "seqs": {k: list(v) for k, v in self.seqs.items()},
            "waiting": list(self.waiting),
            "running": list(self.running),
            "finished": list(self.finished),
            "blocks_used": self.blocks_used,
            "num_preemptions": self.num_preemptions,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | list[int]) -> State:
        if isinstance(data, list):
            return counters(int(data[0]), int(data[1]))
        seqs = {
            k: SeqState(str(s), int(c), int(t), int(b), tuple(map(int, out)))
            for k, (s, c, t, b, out) in data["seqs"].items()
        }
        return cls(
            seqs=seqs,
            waiting=tuple(data["waiting"]),
            running=tuple(data["running"]),
            finished=tuple(data["finished"]),
            blocks_used=int(data["blocks_used"]),
            num_preemptions=int(data["num_preemptions"]),
        )


@functools.lru_cache(maxsize=4096)
def counters(blocks_used: int, num_preemptions: int) -> State:
    """A state of its counters alone (a long run's step between samples: the driver reads
    no more), one object per pair of values: tens of thousands of steps share a few."""
    return State({}, (), (), (), blocks_used, num_preemptions)


class Sample(NamedTuple):
    """One call of `sample_fn`, with what the sequence said of itself at that moment (I3)."""

    seq_id: str
    num_computed: int
    num_tokens: int


@dataclass(frozen=True)
class Update:
    """One `update()`: the ids it returned, the `sample_fn` calls it made, the state after."""

    finished: tuple[str, ...]
    samples: tuple[Sample, ...]
    after: State

    def to_dict(self) -> dict[str, Any]:
        return {
            "finished": list(self.finished),
            "samples": [list(s) for s in self.samples],
            "after": self.after.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Update:
        return cls(
            finished=tuple(data["finished"]),
            samples=tuple(Sample(str(i), int(c), int(t)) for i, c, t in data["samples"]),
            after=State.from_dict(data["after"]),
        )


@dataclass(frozen=True)
class Step:
    """One driver step: add the arrivals, `schedule()`, `update()` (and maybe `update()` again)."""

    number: int  # from 1, as in the spec's tables
    arrivals: tuple[str, ...]
    schedule: tuple[tuple[str, int], ...]  # what schedule() returned, in its order
    scheduled: State  # right after schedule()
    update: Update | None  # None only in a run's last step, when update() itself failed
    again: Update | None = None  # a second update() with no schedule(): must change nothing

    def last(self) -> State:
        """The state at the end of this step, as far as it got."""
        if self.again is not None:
            return self.again.after
        return self.scheduled if self.update is None else self.update.after

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "arrivals": list(self.arrivals),
            "schedule": [list(x) for x in self.schedule],
            "scheduled": self.scheduled.to_dict(),
            "update": None if self.update is None else self.update.to_dict(),
            "again": None if self.again is None else self.again.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        update, again = data["update"], data["again"]
        return cls(
            number=int(data["number"]),
            arrivals=tuple(data["arrivals"]),
            schedule=tuple((str(k), int(v)) for k, v in data["schedule"]),
            scheduled=State.from_dict(data["scheduled"]),
            update=None if update is None else Update.from_dict(update),
            again=None if again is None else Update.from_dict(again),
        )


@dataclass(frozen=True)
class Trace:
    """A workload and what the driver saw at every step, up to the end or the failure."""

    workload: Workload
    steps: tuple[Step, ...]
    failure: Failure | None = None

    def final(self) -> State | None:
        """The state after the last call that completed; None if no step was recorded."""
        return self.steps[-1].last() if self.steps else None

    def to_json(self) -> str:
        return json.dumps(
            {
                "workload": self.workload.to_dict(),
                "steps": [step.to_dict() for step in self.steps],
                "failure": None if self.failure is None else vars(self.failure),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Trace:
        data = json.loads(text)
        failure = data["failure"]
        return cls(
            workload=Workload.from_dict(data["workload"]),
            steps=tuple(Step.from_dict(step) for step in data["steps"]),
            failure=None if failure is None else Failure(**failure),
        )
