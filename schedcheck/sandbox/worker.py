"""The worker process: loads one untrusted submission and runs workloads in it.

Started by `harness.sandbox.isolation` as
`python -m harness.sandbox.worker FD PATH MEMORY WORKDIR UID CPU BOARD`. Everything the checker
needs is imported first; the box's own copy of the submission (PATH, in WORKDIR) is read;
then the worker enters its box (harness/sandbox/box.py: namespaces, the uid UID lent by the
parent, limits). The interpreter lives in root's home, which the box's uid cannot read:
imports must come before. Then what the worker calls is bound (`bind`), and only then is
the submission compiled and run: rebinding a name in schedcheck's modules or the standard
library's afterwards changes nothing the worker calls. It talks to the parent over the
socket FD in JSON: plain data only, and the parent decides, whose fault included
(harness/sandbox/isolation.py).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import linecache
import os
import sys
import time
import traceback
import types
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, NamedTuple, TypeVar

from schedcheck.drive.contract import contract_problems
from schedcheck.drive.driver import describe, play, run
from schedcheck.faults import SubmissionFailure
from schedcheck.model.trace import Step, Trace
from schedcheck.model.workload import Workload
from schedcheck.sandbox import box
from schedcheck.sandbox.beat import Board

_T = TypeVar("_T")

# What a submission may reasonably import; after the privilege drop nothing new can be.
PRELOAD = (
    "abc", "array", "bisect", "collections", "collections.abc", "contextlib", "copy",
    "dataclasses", "enum", "functools", "heapq", "itertools", "linecache", "logging", "math",
    "numbers", "operator", "queue", "random", "re", "statistics", "string", "time",
    "tokenize", "traceback", "typing", "uuid", "warnings", "weakref",
)  # fmt: skip


class Tools(NamedTuple):
    """What the worker calls, taken before the submission runs (the function objects
    themselves, not names looked up later in modules the submission can reach)."""

    send: Callable[[bytes], None]
    receive: Callable[[], bytes]
    dumps: Callable[[Any], str]
    loads: Callable[[str | bytes], Any]
    format_exc: Callable[..., str]
    contract_problems: Callable[[types.ModuleType], list[str]]
    run: Callable[..., Any]
    play: Callable[..., Any]
    workload: Callable[[dict[str, Any]], Workload]
    step_dict: Callable[[Step], dict[str, Any]]
    beat: Callable[[int, str, float, float], None]
    monotonic: Callable[[], float]
    process_time: Callable[[], float]
    fields: Callable[[Any], dict[str, Any]]


def bind(conn: Connection, board: Board) -> Tools:
    return Tools(
        conn.send_bytes, conn.recv_bytes, json.dumps, json.loads, traceback.format_exc,
        contract_problems, run, play, Workload.from_dict, Step.to_dict,
        board.write, time.monotonic, time.process_time, vars,
    )  # fmt: skip


def load_submission(path: str, source: bytes) -> types.ModuleType:
    name = "submission"
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    exec(compile(source, path, "exec"), module.__dict__)
    return module


class Worker:
    """The loop: one command in, plain data out.

    What the submission fails is a "failure" (a verdict); an exception in our own code is
    "internal", which the parent reports as schedcheck's fault, never the submission's.
    """

    def __init__(
        self, conn: Connection, module: types.ModuleType, board: Board, tools: Tools | None = None
    ) -> None:
        self.tools = tools or bind(conn, board)
        self.module = module
        self.sent = 0  # steps of the current run already streamed
        self.serial = 0  # the command being answered: every reply carries its number

    def send(self, **message: Any) -> None:
        self.tools.send(self.tools.dumps({**message, "serial": self.serial}).encode())

    def heartbeat(self, step: int, call: str) -> None:
        """Written before every call into the submission (harness/sandbox/beat.py); with the
        CPU time so far, so that the parent can tell a hung call from one that waits for a
        busy machine's core."""
        self.tools.beat(step, call, self.tools.monotonic(), self.tools.process_time())

    def serve(self) -> None:
        while True:
            request = self.tools.loads(self.tools.receive())
            self.serial = request["serial"]
            try:
                getattr(self, "op_" + request["op"])(request)
            except SubmissionFailure as e:
                self.send(kind="failure", failure=self.tools.fields(e.failure))
            except Exception:
                self.send(kind="internal", message=self.tools.format_exc(limit=-8))

    def op_run(self, request: dict[str, Any]) -> None:
        workload = self.tools.workload(request["workload"])
        self.sent = 0
        self.end(self.tools.run(self.module, workload, None, self.heartbeat, self.step_done))

    def op_play(self, request: dict[str, Any]) -> None:
        """A script of calls (the stateful test's), streamed like a run."""
        workload = self.tools.workload(request["workload"])
        self.sent = 0
        script = request["script"]
        self.end(self.tools.play(self.module, workload, script, self.heartbeat, self.step_done))

    def end(self, trace: Trace) -> None:
        failure = None if trace.failure is None else self.tools.fields(trace.failure)
        # A failure mid-step leaves a step the stream never carried: send it with the end.
        rest = [self.tools.step_dict(step) for step in trace.steps[self.sent :]]
        self.send(kind="end", rest=rest, failure=failure)

    def step_done(self, step: Step) -> None:
        self.sent += 1
        self.send(kind="step", step=self.tools.step_dict(step))


def boxed(
    argv: list[str], read: Callable[[str], _T], preload: tuple[str, ...] = ()
) -> tuple[Connection, Board, str, _T]:
    """Everything up to the box: import what the worker needs, `read(PATH)` (the box's own
    copy, out of view once inside), enter the box, say "booted" (with the isolation level).
    Returns the connection, the heartbeat board, PATH and what `read` returned."""
    fd, path, memory, workdir = int(argv[0]), argv[1], int(argv[2]), argv[3]
    uid, cpu = (None if argv[4] == "-" else int(argv[4])), int(argv[5])
    board = Board(int(argv[6]))
    namespaces = not os.environ.get("SCHEDCHECK_NO_NAMESPACES")
    conn = Connection(fd)
    for name in PRELOAD + preload:
        with contextlib.suppress(ImportError):  # an optional extra (xxhash, numpy) may be absent
            importlib.import_module(name)
    payload = read(path)
    parent = os.getppid()
    os.chdir(workdir)
    level = box.enter(uid, workdir, box.BoxLimits(memory=memory, cpu=cpu), namespaces)
    box.die_with_parent(None if level == "full" else parent)
    # Up to here it was all ours: a worker that dies before this line is our fault.
    conn.send_bytes(json.dumps({"kind": "booted", "isolation": level, "serial": 0}).encode())
    return conn, board, path, payload


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

    def ready(**message: Any) -> None:
        tools.send(tools.dumps({"kind": "ready", **message, "serial": 0}).encode())

    try:
        module = load_submission(path, source)
    except (Exception, SystemExit) as e:
        ready(load_error=describe(e, types.SimpleNamespace(__file__=path)))  # type: ignore[arg-type]
        return
    try:
        problems = tools.contract_problems(module)
        if not isinstance(problems, list):
            raise TypeError(f"contract_problems returned {problems!r}, not a list")
    except Exception:  # contract_problems guards every call into the submission
        ready(internal=tools.format_exc(limit=-8))
        return
    ready(problems=problems)
    if not problems:
        Worker(conn, module, board, tools).serve()


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    finally:
        os._exit(0)  # never run the submission's atexit hooks or finalizers
