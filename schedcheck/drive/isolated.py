"""A P07 implementation in a sandboxed worker (schedcheck/sandbox/process.py): the
scheduler's run protocol over the sandbox's commands. A run or a script goes out as one
command; its steps stream back as plain data and become a Trace; a hang, a death or garbage
is the trace's failure (C1).

Whose fault an error inside the worker is, is decided here, in the parent, never by the
worker: when the worker reports a failure of schedcheck's own code (or sends what is no
trace), the same run is repeated on the reference in a fresh worker (`referee`): if it runs
through there, the worker broke only with the submission in it (the submission's failure);
if it breaks there too, the fault is ours (exit 3).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from schedcheck.drive.held import HELD_AT, steps_held
from schedcheck.drive.loader import reference_source
from schedcheck.faults import CheckerError, Failure
from schedcheck.invariants.liveness import liveness_bound
from schedcheck.model.trace import Step, Trace
from schedcheck.model.wire import Reader, Stream
from schedcheck.model.workload import Script, Workload
from schedcheck.sandbox.process import Limits, Sandbox, Unread, internal

_T = TypeVar("_T")
WORKER = "schedcheck.drive.worker"


@functools.cache
def reference_copy() -> str:
    """The reference as a submission file (schedcheck/drive/loader.py), written once: the
    referee's worker runs it exactly as a student's file is run."""
    folder = tempfile.mkdtemp(prefix="schedcheck-referee-")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, "p07_scheduler.py")
    with open(path, "w") as f:
        f.write(reference_source())
    return path


class Isolated(Sandbox):
    """A submission file run in a worker of its own (the P07 worker, schedcheck/drive/
    worker.py): `run` and `play` give traces."""

    dumps_stack = True  # drive/worker.py installs sandbox/stack.py's handler
    _like: tuple[Stream | None, ...] = ()  # the next command's expected streams (expect)
    _page: bytes | None = None  # the worker's page from HELD_AT, as it was when it stopped

    def __init__(
        self,
        path: str | Path,
        limits: Limits | None = None,
        referee: bool = False,
        worker: str = WORKER,
    ) -> None:
        super().__init__(path, limits, worker, referee)

    def expect(self, *traces: Trace) -> None:
        """The reference's traces of the next command's runs (its run, or a pair's two):
        what the worker sends as they would is taken as their steps, unread (model/wire.py:
        Reader's `like`). Grade has them before the submission runs."""
        self._like = tuple(_stream(trace) for trace in traces)

    def _likes(self, count: int) -> list[Stream | None]:
        likes, self._like = self._like, ()
        return list(likes) if len(likes) == count else [None] * count

    def referee(self) -> Sandbox | None:
        """The reference in a fresh worker of the same code: an error that our code makes
        without the submission recurs there."""
        if self.is_referee:
            return None
        return Isolated(reference_copy(), self.limits, referee=True, worker=self.worker)

    # -- runs ----------------------------------------------------------------------------------

    def run(self, workload: Workload) -> Trace:
        """Run `workload` in the worker; any hang, death or garbage is the trace's failure."""
        return self.run_while(workload, lambda: None)[0]

    def run_while(self, workload: Workload, meanwhile: Callable[[], _T]) -> tuple[Trace, _T]:
        """Run `workload` in the worker and, while it runs, `meanwhile()` here (the reference
        run of R1: two cores at work instead of one waiting for the other)."""
        # Calls a driver run makes at most: Scheduler(), Sequence() and add() per request,
        # schedule(), update() and update() again per step, up to the liveness bound.
        bound = liveness_bound(workload)
        calls = 1 + 2 * len(workload.requests) + 3 * bound
        return self._stream(workload, calls, bound, meanwhile, op="run")

    def run_pair(self, first: Workload, second: Workload) -> tuple[Trace, Trace]:
        """Two schedulers alive at once in the worker (driver.run_pair): their traces."""
        calls = sum(1 + 2 * len(w.requests) + 3 * liveness_bound(w) for w in (first, second))
        most = (liveness_bound(first), liveness_bound(second))
        self._retire_if_spent()
        self._ensure()
        assert self._out is not None
        self._out.take()
        self.where = (0, "Scheduler() of scheduler A")
        likes = self._likes(2)
        command = {"op": "pair", "workloads": [first.to_dict(), second.to_dict()]}
        try:
            self._send(calls, **command)
        except Unread as e:
            self.output = ""
            return Trace(first, (), e.failure), Trace(second, (), None)
        a, b = self._collect((first, second), command, most, likes)
        return a, b

    def play(self, workload: Workload, script: Script) -> Trace:
        """Play `script` (schedcheck/drive/driver.py) in the worker: one command for a whole
        stateful run, its steps streamed back as a run's are."""
        calls = 1 + sum(2 if op[0] in ("add", "step") else 1 for op in script)
        calls += 2 * liveness_bound(workload) * sum(op[0] == "finish" for op in script)
        most = calls  # a step is two calls at least: never more steps than calls
        return self._stream(workload, calls, most, lambda: None, op="play", script=script)[0]

    def _stream(
        self,
        workload: Workload,
        calls: int,
        most: int,
        meanwhile: Callable[[], _T],
        **command: Any,
    ) -> tuple[Trace, _T]:
        self._retire_if_spent()
        self._ensure()
        assert self._out is not None
        self._out.take()
        self.where = (0, "Scheduler()")
        likes = self._likes(1)
        self._page = None  # this run's steps held on the page, if it stops (stop)
        try:
            self._send(calls, workload=workload.to_dict(), **command)
        except Unread as e:
            self.output = ""
            return Trace(workload, (), e.failure), meanwhile()
        try:
            value = meanwhile()
        except BaseException:
            self.stop()  # mid-run: the next workload gets a fresh worker
            raise
        return self._collect((workload,), command, (most,), likes)[0], value

    def _collect(
        self,
        workloads: tuple[Workload, ...],
        command: dict[str, Any],
        most: tuple[int, ...],
        likes: list[Stream | None],
    ) -> list[Trace]:
        """The traces of a command's run: one, or a pair's two (each step says which: "of"),
        each read from its stream (model/wire.py: a state as what changed since the one
        before it; each run has at most `most` steps); the failure is the one run's it
        stopped in."""
        assert self._out is not None
        steps: list[list[Step]] = [[] for _ in workloads]
        readers = [Reader(w, m, k) for w, m, k in zip(workloads, most, likes, strict=True)]
        failure: Failure | None = None
        of = 0  # the run the failure is charged to
        while True:
            message = self._receive()
            if isinstance(message, Failure):
                failure, of = message, self._failing_run(len(workloads))
                if len(workloads) == 1:
                    steps[0] += self._held(readers[0], len(steps[0]))
                break
            try:
                kind = message["kind"]
                if kind == "internal":
                    self.stop()
                    failure = self._blamed(internal(message), _again(workloads, command))
                    break
                if kind == "step":
                    of = _of(message, workloads)
                    steps[of].append(readers[of].step(message["step"]))
                elif kind == "steps":  # a long run's, in a batch (idle runs packed)
                    for item in _items(message["steps"]):
                        steps[0].extend(readers[0].unpack(item))
                elif kind == "end":
                    for item in _items(message["rest"]):
                        of, wire = item if len(workloads) > 1 else (0, item)
                        of = _of({"of": of}, workloads)
                        steps[of].append(readers[of].step(wire))
                    if message["failure"] is not None:
                        failure = Failure.from_worker(message["failure"])
                        of = _of(message["failure"], workloads)
                    failure = failure or self._threads_left(len(steps[0]))
                    break
            except (KeyError, TypeError, ValueError, IndexError, AttributeError):
                self.stop()
                what = "the worker sent something that is not a trace"
                failure = self._blamed(what, _again(workloads, command))
                break
        self.output = self._out.take() if self._out is not None else ""
        return [
            Trace(w, tuple(s), failure if i == of else None)
            for i, (w, s) in enumerate(zip(workloads, steps, strict=True))
        ]

    def stop(self) -> None:
        """Stop the worker, keeping a copy of the steps its page holds (drive/held.py): a
        run that hung or died is read to its last complete step (_held)."""
        if self.board is not None:
            self._page = bytes(self.board.page[HELD_AT:])
        super().stop()

    def _held(self, reader: Reader, received: int) -> list[Step]:
        """The steps the stopped worker's page held after the `received` ones; none where it
        holds none, or nothing a trace can hold (the worker's word: a page it garbled
        costs it only the steps it held)."""
        page, self._page = self._page, None
        held = None if page is None else steps_held(page, received)
        if held is None:
            return []
        try:
            return [reader.step(wire) for wire in _items(json.loads(held))]
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError):
            return []

    def _failing_run(self, runs: int) -> int:
        """Which of a pair's runs the call under way (a hang, a death) belongs to: the board
        names it ("schedule() of scheduler B")."""
        return 1 if runs > 1 and self.where[1].endswith(" of scheduler B") else 0


# The streams of the reference's traces grade holds runs to (a few hundred a process), by
# the trace's identity (a Trace does not hash): each made once (Stream.of).
_STREAMS: dict[int, tuple[Trace, Stream]] = {}


def _stream(trace: Trace) -> Stream:
    known = _STREAMS.get(id(trace))
    if known is None or known[0] is not trace:
        if len(_STREAMS) >= 4096:
            _STREAMS.clear()
        known = _STREAMS[id(trace)] = (trace, Stream.of(trace))
    return known[1]


def _items(value: Any) -> list[Any]:
    """A message's list of steps (anything else: the worker sent no trace)."""
    if type(value) is not list:
        raise ValueError(f"not a list of steps: {str(value)[:80]}")
    return value


def _of(message: dict[str, Any], workloads: tuple[Workload, ...]) -> int:
    """Which run a streamed step or a failure belongs to: "of", for a pair's; else 0."""
    of = message.get("of", 0) if len(workloads) > 1 else 0
    if type(of) is not int or not 0 <= of < len(workloads):
        raise ValueError(f"no run {of!r}")
    return of


def _again(workloads: tuple[Workload, ...], command: dict[str, Any]) -> Callable[[Sandbox], None]:
    """The same run, pair or script, for the referee: it must run through."""

    def replay(referee: Sandbox) -> None:
        assert isinstance(referee, Isolated)
        if command["op"] == "play":
            _through(referee.play(workloads[0], command["script"]))
        elif command["op"] == "pair":
            for trace in referee.run_pair(*workloads):
                _through(trace)
        else:
            _through(referee.run(workloads[0]))

    return replay


def _through(trace: Trace) -> None:
    """A referee's run must end as a run of the reference does: with no failure."""
    if trace.failure is not None:
        raise CheckerError(f"the reference failed too: {trace.failure.message}")
