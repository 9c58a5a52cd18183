"""The P07 worker: loads one untrusted submission in the sandbox (schedcheck/sandbox/
worker.py) and runs workloads and scripts in it, their steps streamed back as plain data.

Started by schedcheck/drive/isolated.py as `python -m schedcheck.drive.worker` with the
sandbox worker's arguments. Everything it needs is imported first; the box's own copy of
the submission is read, the box entered, what the worker calls is bound (`bind`), and only
then is the submission compiled and run: rebinding a name in schedcheck's modules or the
standard library's afterwards changes nothing the worker calls.
"""

from __future__ import annotations

import linecache
import os
import sys
import types
from collections.abc import Callable
from functools import partial
from multiprocessing.connection import Connection
from typing import Any, NamedTuple

from schedcheck.drive.contract import contract_problems
from schedcheck.drive.driver import describe, play, run, run_pair
from schedcheck.drive.held import HEAD, HELD_AT, ROOM, head
from schedcheck.model.trace import Step, Trace
from schedcheck.model.wire import Writer, pack
from schedcheck.model.workload import Workload
from schedcheck.sandbox import stack
from schedcheck.sandbox.beat import Board
from schedcheck.sandbox.worker import Tools, Worker, bind, boxed, ready


class Driving(NamedTuple):
    """The driver's functions the worker calls, taken before the submission runs."""

    contract_problems: Callable[[types.ModuleType], list[str]]
    run: Callable[..., Any]
    run_pair: Callable[..., Any]
    play: Callable[..., Any]
    workload: Callable[[dict[str, Any]], Workload]
    writer: Callable[[], Writer]  # a stream's steps as the parent reads them (model/wire.py)
    step: Callable[[Writer, Step], list[Any]]
    pack: Callable[[list[Any], list[Any]], None]  # a long run's batch, idle runs merged
    head: Callable[..., None]  # the held steps' head, written on the page (drive/held.py)


def driving() -> Driving:
    return Driving(
        contract_problems,
        run,
        run_pair,
        play,
        Workload.from_dict,
        Writer,
        Writer.step,
        pack,
        HEAD.pack_into,
    )


def load_submission(path: str, source: bytes) -> types.ModuleType:
    name = "submission"
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    exec(compile(source, path, "exec"), module.__dict__)
    return module


class SchedulerWorker(Worker):
    """Runs and scripts on one loaded submission."""

    def __init__(
        self,
        conn: Connection,
        module: types.ModuleType,
        board: Board,
        tools: Tools | None = None,
        drive: Driving | None = None,
    ) -> None:
        super().__init__(conn, board, tools)
        self.module = module
        self.drive = drive or driving()
        self.sent = 0  # steps of the current run already streamed
        self.sents = [0, 0]  # the same, of each scheduler of a pair
        self.batch = 0  # a long run's steps sent a message at a time; 0: held on the page
        self.pending: list[Any] = []
        # each run's stream: a state goes as what changed since the one before it in it
        self.writers = [self.drive.writer(), self.drive.writer()]
        # A run's steps held on the heartbeat page until it is full (drive/held.py): from
        # the run's step `first` on, `held` bytes of them.
        self.page = board.page
        self.first = self.held = 0

    def op_run(self, request: dict[str, Any]) -> None:
        workload = self.drive.workload(request["workload"])
        self.sent = 0
        self.writers[0] = self.drive.writer()
        self.unhold()
        # a long run's steps go in batches of its sampling's length, idle runs packed (its
        # tens of thousands of steps would fill the page thousands of times): a death loses
        # at most one batch
        self.batch = workload.sample_every
        self.end(self.drive.run(self.module, workload, None, self.heartbeat, self.step_done))

    def op_play(self, request: dict[str, Any]) -> None:
        """A script of calls (the stateful test's), streamed like a run."""
        workload = self.drive.workload(request["workload"])
        self.sent = 0
        self.writers[0] = self.drive.writer()
        self.unhold()
        script = request["script"]
        self.end(self.drive.play(self.module, workload, script, self.heartbeat, self.step_done))

    def op_pair(self, request: dict[str, Any]) -> None:
        """Two schedulers alive at once (driver.run_pair), streamed like a run: each step
        says which scheduler's it is ("of": 0 or 1), each scheduler's a stream of its own."""
        first, second = (self.drive.workload(w) for w in request["workloads"])
        self.sents = [0, 0]
        self.writers = [self.drive.writer(), self.drive.writer()]
        traces = self.drive.run_pair(self.module, first, second, self.heartbeat, self.of_done)
        rest = [
            [of, self.drive.step(self.writers[of], step)]
            for of, trace in enumerate(traces)
            for step in trace.steps[self.sents[of] :]
        ]
        failed = [of for of, trace in enumerate(traces) if trace.failure is not None]
        failure = None
        if failed:
            failure = {**self.tools.fields(traces[failed[0]].failure), "of": failed[0]}
        self.send(kind="end", rest=rest, failure=failure)

    def end(self, trace: Trace) -> None:
        self.batch = 0
        if self.pending:
            self.send(kind="steps", steps=self.pending)
            self.pending = []
        failure = None if trace.failure is None else self.tools.fields(trace.failure)
        # A failure mid-step leaves a step the stream never carried: send it with the end.
        writer = self.writers[0]
        rest = [self.drive.step(writer, step) for step in trace.steps[self.sent :]]
        if not self.held:
            self.send(kind="end", rest=rest, failure=failure)
            return
        # the steps held, then the rest: one message, built of their JSON as it stands
        after = self.tools.dumps(rest)[1:-1].encode()
        steps = b"[" + self.holding() + (b", " + after if after else b"") + b"]"
        self.tools.send(
            b'{"kind": "end", "rest": '
            + steps
            + b', "failure": '
            + self.tools.dumps(failure).encode()
            + b', "serial": '
            + str(self.serial).encode()
            + b"}"
        )
        self.unhold()

    def step_done(self, step: Step) -> None:
        index = self.sent
        self.sent += 1
        wire = self.drive.step(self.writers[0], step)
        if self.batch:
            self.drive.pack(self.pending, wire)
            if len(self.pending) >= self.batch:
                self.send(kind="steps", steps=self.pending)
                self.pending = []
            return
        data = self.tools.dumps(wire).encode()
        if self.held and self.held + 2 + len(data) > ROOM:
            self.send_held()
        if len(data) > ROOM:  # too large for the page: alone, at once
            self.send_steps(data)
            return
        if self.held:
            data = b", " + data
        else:
            self.first = index
        at = HELD_AT + HEAD.size + self.held
        self.page[at : at + len(data)] = data  # the steps first, then the head that says so
        self.held += len(data)
        self.drive.head(self.page, HELD_AT, *head(self.first, self.held))

    def holding(self) -> bytes:
        start = HELD_AT + HEAD.size
        return self.page[start : start + self.held]

    def send_held(self) -> None:
        """The steps held, in a message; then the page holds none (in that order: a death
        in between leaves steps the parent has, which it then reads no more)."""
        self.send_steps(self.holding())
        self.unhold()

    def unhold(self) -> None:
        self.held = 0
        self.drive.head(self.page, HELD_AT, *head(0, 0))

    def send_steps(self, steps: bytes) -> None:
        self.tools.send(
            b'{"kind": "steps", "steps": ['
            + steps
            + b'], "serial": '
            + str(self.serial).encode()
            + b"}"
        )

    def of_done(self, of: int, step: Step) -> None:
        self.sents[of] += 1
        self.send(kind="step", of=of, step=self.drive.step(self.writers[of], step))


def _read_submission(path: str) -> bytes:
    with open(path, "rb") as f:
        source = f.read()
    # Tracebacks quote the submission's lines from here: its file is out of the box's view.
    lines = source.decode(errors="replace").splitlines(keepends=True)
    linecache.cache[path] = (len(source), None, lines, path)
    return source


def main(argv: list[str]) -> None:
    conn, board, path, source = boxed(argv, _read_submission)
    tools = bind(conn, board)  # before the submission runs: what it rebinds, we do not call
    say = partial(ready, tools)  # likewise
    drive = driving()
    stack.install()  # where a hung call is, when the parent asks (sandbox/stack.py)
    try:
        module = load_submission(path, source)
    except (Exception, SystemExit) as e:
        say(load_error=describe(e, types.SimpleNamespace(__file__=path)))  # type: ignore[arg-type]
        return
    try:
        problems = drive.contract_problems(module)
        if not isinstance(problems, list):
            raise TypeError(f"contract_problems returned {problems!r}, not a list")
    except Exception:  # contract_problems guards every call into the submission
        say(internal=tools.format_exc(limit=-8))
        return
    say(problems=problems)
    if not problems:
        SchedulerWorker(conn, module, board, tools, drive).serve()


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    finally:
        os._exit(0)  # never run the submission's atexit hooks or finalizers
