"""The worker's side of the sandbox: the box, the command loop, the heartbeat; what a
worker runs (a P07 submission, schedcheck/drive/worker.py; an engine, schedcheck/engine/
worker.py) is its own module's, started by the parent (schedcheck/sandbox/process.py) as
`python -m MODULE FD PATH MEMORY WORKDIR UID CPU BOARD`. Everything the checker
needs is imported first; the box's own copy of the submission (PATH, in WORKDIR) is read;
then the worker enters its box (schedcheck/sandbox/box.py: namespaces, the uid UID lent by the
parent, limits). The interpreter lives in root's home, which the box's uid cannot read:
imports must come before. Then what the worker calls is bound (`bind`), and only then is
the submission compiled and run: rebinding a name in schedcheck's modules or the standard
library's afterwards changes nothing the worker calls. It talks to the parent over the
socket FD in JSON: plain data only, and the parent decides, whose fault included
(schedcheck/sandbox/process.py).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, NamedTuple, TypeVar

from schedcheck.faults import SubmissionFailure
from schedcheck.sandbox import box
from schedcheck.sandbox.beat import Board

_T = TypeVar("_T")

# What a submission may reasonably import; after the privilege drop nothing new can be.
PRELOAD = (
    "abc",
    "array",
    "bisect",
    "collections",
    "collections.abc",
    "contextlib",
    "copy",
    "dataclasses",
    "enum",
    "functools",
    "heapq",
    "itertools",
    "linecache",
    "logging",
    "math",
    "numbers",
    "operator",
    "queue",
    "random",
    "re",
    "statistics",
    "string",
    "time",
    "tokenize",
    "traceback",
    "typing",
    "uuid",
    "warnings",
    "weakref",
)


class Tools(NamedTuple):
    """What the worker calls, taken before the code under test runs (the function objects
    themselves, not names looked up later in modules that code can reach)."""

    send: Callable[[bytes], None]
    receive: Callable[[], bytes]
    dumps: Callable[[Any], str]
    loads: Callable[[str | bytes], Any]
    format_exc: Callable[..., str]
    beat: Callable[[int, str, float, float], None]
    monotonic: Callable[[], float]
    process_time: Callable[[], float]
    fields: Callable[[Any], dict[str, Any]]


def bind(conn: Connection, board: Board) -> Tools:
    return Tools(
        conn.send_bytes,
        conn.recv_bytes,
        json.dumps,
        json.loads,
        traceback.format_exc,
        board.write,
        time.monotonic,
        time.process_time,
        vars,
    )


def ready(
    tools: Tools,
    *,
    problems: list[str] | None = None,
    load_error: str | None = None,
    internal: str | None = None,
) -> None:
    """The worker's second message, after "booted": the code under test loaded (and the
    contract problems it has: `problems`), or why it did not (`load_error`: its fault;
    `internal`: ours). Every worker says it here, and the parent reads it in one place
    (process.py, Sandbox.start)."""
    message: dict[str, Any] = {"kind": "ready", "serial": 0}
    if load_error is not None:
        message["load_error"] = load_error
    elif internal is not None:
        message["internal"] = internal
    else:
        message["problems"] = list(problems or ())
    tools.send(tools.dumps(message).encode())


class Worker:
    """The loop: one command in, plain data out.

    What the submission fails is a "failure" (a verdict); an exception in our own code is
    "internal", which the parent reports as schedcheck's fault, never the submission's.
    """

    def __init__(self, conn: Connection, board: Board, tools: Tools | None = None) -> None:
        self.tools = tools or bind(conn, board)
        self.serial = 0  # the command being answered: every reply carries its number

    def send(self, **message: Any) -> None:
        self.tools.send(self.tools.dumps({**message, "serial": self.serial}).encode())

    def heartbeat(self, step: int, call: str) -> None:
        """Written before every call into the submission (schedcheck/sandbox/beat.py); with the
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
