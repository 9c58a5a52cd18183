"""A run's steps as the worker streams them to the parent (issue 56): compact JSON lists, each
state sent as what changed since the state before it in the same stream.

Per call the driver copies every sequence (schedcheck/drive/driver.py); most do not change
from one call to the next. The worker's `Writer` sends a whole state as its counters, each
queue only where it changed (else null), and only the sequences that changed, an output as
how much of the one before it kept and the tokens after; the parent's `Reader` rebuilds the
very same `State` from the state before it, sharing what did not change (a `SeqState`, a
queue, a whole state). Both sides walk the stream in one order: a step's state after
schedule(), after update(), after update() again, step after step (and a pair's two runs
each in a stream of its own), so each side's state before is the other's.

A step is `[number, arrivals, schedule, scheduled, update, again]`: `schedule` flat (id, n,
id, n, ...); `update` and `again` are null or `[finished, samples, after]`, `samples` flat
(id, num_computed, num_tokens, ...). A state is `[blocks_used, num_preemptions]` when it
holds its counters alone (a long run's step between samples: Workload.sample_every; or an
empty scheduler), else `[blocks_used, num_preemptions, waiting, running, finished,
changes]`, a queue null where it is the state before's, `changes` a list of `[seq_id,
status, num_computed, num_tokens, num_blocks, keep, tail]`: that sequence's output is the
first `keep` tokens of its output before, then `tail`.

The worker is the submission's process: the Reader takes nothing on trust. Every value is
type-checked (ints are ints, ids are the workload's own, statuses one of the three names)
and anything else raises ValueError, TypeError, KeyError or IndexError, which the parent
reads as a reply that is no trace (schedcheck/drive/isolated.py), never as a verdict on it.
Ids become the workload's own str objects: a trace read here compares with the reference's
by identity wherever they agree.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

from schedcheck.model.trace import Sample, SeqState, State, Step, Trace, Update, counters
from schedcheck.model.workload import Workload

STATUSES = {name: name for name in ("WAITING", "RUNNING", "FINISHED")}
_INT = frozenset({int})
_STR = frozenset({str})
_seq_state = functools.partial(tuple.__new__, SeqState)  # in C: NamedTuple's __new__ is not
_START = counters(0, 0)  # the state before a stream's first: nothing added yet


class Writer:
    """The worker's side: one run's steps, in order, as the stream carries them."""

    def __init__(self) -> None:
        self.base = _START

    def step(self, step: Step) -> list[Any]:
        update, again = step.update, step.again
        return [
            step.number,
            step.arrivals,
            [x for pair in step.schedule for x in pair],
            self.state(step.scheduled),
            None if update is None else self.update(update),
            None if again is None else self.update(again),
        ]

    def update(self, update: Update) -> list[Any]:
        samples = [x for sample in update.samples for x in sample]
        return [update.finished, samples, self.state(update.after)]

    def state(self, state: State) -> list[Any]:
        base, self.base = self.base, state
        if state.light():
            return [state.blocks_used, state.num_preemptions]
        known = base.seqs
        changes = []
        for seq_id, seq in state.seqs.items():
            was = known.get(seq_id)
            if was is seq:
                continue
            if was is None:
                changes.append([seq_id, *seq[:4], 0, seq[4]])
            elif seq != was:
                out, old = seq[4], was[4]
                keep = len(old) if out[: len(old)] == old else 0
                changes.append([seq_id, *seq[:4], keep, out[keep:]])
        return [
            state.blocks_used,
            state.num_preemptions,
            None if state.waiting == base.waiting else state.waiting,
            None if state.running == base.running else state.running,
            None if state.finished == base.finished else state.finished,
            changes,
        ]


def pack(batch: list[Any], wire: list[Any]) -> None:
    """Add a long run's step (as `Writer.step` wrote it) to a batch: a step where nothing
    arrived, nothing was scheduled or finished and the counters did not move is merged into
    the idle run before it (most of a marathon's tens of thousands)."""
    number, arrivals, schedule, scheduled, update, again = wire
    idle = (
        not arrivals
        and not schedule
        and again is None
        and update is not None
        and not update[0]
        and not update[1]
        and len(scheduled) == 2
        and update[2] == scheduled
    )
    if not idle:
        batch.append(wire)
        return
    last = batch[-1] if batch else None
    if isinstance(last, dict):
        first, count, blocks, preemptions = last["idle"]
        if first + count == number and [blocks, preemptions] == scheduled:
            last["idle"][1] += 1
            return
    batch.append({"idle": [number, 1, *scheduled]})


@dataclass(frozen=True)
class Stream:
    """A run's stream as a trace makes it (the reference's, which grade knows before the
    submission runs): its items in the order a worker sends them, as they arrive (JSON's
    lists), and the steps each stands for (one; an idle run's, several)."""

    items: list[Any]
    steps: list[tuple[Step, ...]]

    @classmethod
    def of(cls, trace: Trace) -> Stream:
        """What a worker sends of `trace`: every step's wire; a long run's (Workload.
        sample_every) packed in batches of that many items, as drive/worker.py packs them."""
        batch = trace.workload.sample_every
        writer, items, pending = Writer(), [], []  # type: ignore[var-annotated]
        for step in trace.steps:
            wire = writer.step(step)
            if not batch:
                items.append(wire)
                continue
            pack(pending, wire)
            if len(pending) >= batch:
                items += pending
                pending = []
        items = json.loads(json.dumps(items + pending))
        steps, at = [], 0
        for item in items:
            count = item["idle"][1] if type(item) is dict else 1
            steps.append(trace.steps[at : at + count])
            at += count
        return cls(items, steps)


class Reader:
    """The parent's side: one run's stream read back into Steps, each value checked.

    With `like`, a stream the run is expected to send (the reference's: R1 holds the run
    to it), an item equal to the one `like` has at its place, every item before it equal
    too, stands for `like`'s own steps: each item is read from the state before it, which
    is then the same, so what it stands for is the same too. It is taken as it is, not
    read again, and shared with the reference's trace (R1 finds them equal at once). From
    the first item that differs on, items are read as any are."""

    def __init__(self, workload: Workload, most: int, like: Stream | None = None) -> None:
        self.base = _START
        self.ids = {r.seq_id: r.seq_id for r in workload.requests}
        self.left = most  # steps the run can still have (its calls' bound)
        self.next = 1  # the next step's number: a run's are 1, 2, 3, ...
        self.like = like
        self.at = 0  # the next item's place in the stream

    def _known(self, item: Any) -> tuple[Step, ...] | None:
        """The steps `like` has for `item`, if it is the item `like` has at its place."""
        like, at = self.like, self.at
        if like is None:
            return None
        self.at += 1
        if at < len(like.items) and like.items[at] == item:
            steps = like.steps[at]
            self._count(steps[0].number, len(steps))
            self.base = steps[-1].last()
            return steps
        self.like = None  # it went its own way: read on
        return None

    def _count(self, first: Any, steps: int) -> None:
        if not 0 < steps <= self.left or first != self.next or type(first) is not int:
            _no((first, steps), "the next steps, within the run's bound")
        self.left -= steps
        self.next += steps

    def step(self, wire: list[Any]) -> Step:
        known = self._known(wire)
        if known is not None:
            return known[0]  # a wire's item stands for one step
        if type(wire) is not list or len(wire) != 6:
            _no(wire)
        number, arrivals, schedule, scheduled, update, again = wire
        self._count(number, 1)
        if type(arrivals) is not list or type(schedule) is not list:
            _no(wire)
        ids = self.ids
        pairs: tuple[tuple[str, int], ...] = ()
        if schedule:
            keys: list[str] = schedule[0::2]
            if not _STR.issuperset(map(type, keys)):
                _no(keys, "ids")
            named = [ids.get(k, k) for k in keys]  # any str: I6 judges an unknown id
            pairs = tuple(zip(named, _ints(schedule[1::2]), strict=True))
        return Step(
            number,
            tuple([ids[k] for k in arrivals]) if arrivals else (),
            pairs,
            self.state(scheduled),
            None if update is None else self.update(update),
            None if again is None else self.update(again),
        )

    def update(self, wire: list[Any]) -> Update:
        if type(wire) is not list or len(wire) != 3:
            _no(wire, "an update")
        finished, samples, after = wire
        if type(finished) is not list or type(samples) is not list:
            _no(wire, "an update")
        ids = self.ids
        drawn: tuple[Sample, ...] = ()
        if samples:
            if len(samples) % 3:
                _no(samples, "samples")
            seq_ids = [ids[k] for k in samples[0::3]]
            computed, tokens = _ints(samples[1::3]), _ints(samples[2::3])
            drawn = tuple(map(Sample, seq_ids, computed, tokens))
        return Update(
            tuple([ids[k] for k in finished]) if finished else (),
            drawn,
            self.state(after),
        )

    def state(self, wire: list[Any]) -> State:
        if type(wire) is not list:
            _no(wire, "a state")
        if len(wire) == 2:
            state = counters(*_ints(wire))
            self.base = state
            return state
        blocks, preemptions, waiting, running, finished, changes = wire
        if type(blocks) is not int or type(preemptions) is not int or type(changes) is not list:
            _no(wire, "a state")
        base = self.base
        unmoved = blocks == base.blocks_used and preemptions == base.num_preemptions
        if unmoved and not changes and waiting is None and running is None and finished is None:
            return base  # unchanged: the same object (an update() again, an idle step)
        seqs = base.seqs
        if changes:
            seqs = dict(seqs)
            ids = self.ids
            for change in changes:
                if type(change) is not list or len(change) != 7:
                    _no(change, "a sequence's change")
                seq_id, status, computed, tokens, num_blocks, keep, tail = change
                if not _INT.issuperset(map(type, change[2:6])) or type(tail) is not list:
                    _no(change, "a sequence's change")
                seq_id = ids[seq_id]
                was = seqs.get(seq_id)
                old = () if was is None else was[4]
                if not 0 <= keep <= len(old):
                    _no(keep, "a kept length")
                out = old[:keep] + tuple(_ints(tail)) if tail else old[:keep]
                seqs[seq_id] = _seq_state((STATUSES[status], computed, tokens, num_blocks, out))
        state = State(
            seqs,
            base.waiting if waiting is None else self.queue(waiting, seqs),
            base.running if running is None else self.queue(running, seqs),
            base.finished if finished is None else self.queue(finished, seqs),
            blocks,
            preemptions,
        )
        self.base = state
        return state

    def queue(self, wire: list[Any], seqs: dict[str, SeqState]) -> tuple[str, ...]:
        """A queue's ids: each one of a sequence the state holds (an honest worker's are)."""
        known = self.ids
        if type(wire) is not list:
            _no(wire, "a queue")
        queue = tuple([known[k] for k in wire])
        if not seqs.keys() >= set(queue):
            _no(queue, "a queue of added sequences")
        return queue

    def unpack(self, item: Any) -> Iterator[Step]:
        """A batch's item as the steps it stands for (pack's inverse)."""
        if type(item) is not dict:
            yield self.step(item)
            return
        known = self._known(item)
        if known is not None:
            yield from known
            return
        first, count, blocks, preemptions = _ints(_list(item["idle"]))
        self._count(first, count)
        state = counters(blocks, preemptions)
        update = Update((), (), state)
        self.base = state
        for k in range(count):
            yield Step(first + k, (), (), state, update)


def _list(value: Any) -> list[Any]:
    if type(value) is not list:
        _no(value, "a list")
    return value


def _ints(values: list[Any]) -> list[int]:
    if not _INT.issuperset(map(type, values)):  # one pass in C: the hot path
        _no(values, "ints")
    return values


def _no(value: Any, what: str = "a step") -> NoReturn:
    raise ValueError(f"the worker sent {str(value)[:80]} where a trace has {what}")
