"""An engine's worker process, whatever the engine: its adapter reads what it needs before
the box (adapter.before_box), loads the engine inside it (adapter.in_box: the engine's own
code runs there, never in the checking process), and drives each run there; each run's
trace goes back as plain data, and the checks run in the parent.

Each adapter's worker module is one line, `serve(ADAPTER)`, started by engine/isolated.py
as `python -m WORKER` with the sandbox worker's arguments (schedcheck/sandbox/worker.py).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from schedcheck.engine.adapter import Adapter, EngineSetup, Loaded
from schedcheck.engine.workload import EngineWorkload
from schedcheck.sandbox.beat import Board
from schedcheck.sandbox.worker import Tools, Worker, bind, boxed, ready

__all__ = ["LoadError", "serve"]


@dataclass(frozen=True)
class LoadError:
    """What before_box returns when the engine's own code failed to load (its fault, told
    to the parent as a load error); an exception it raises is ours."""

    message: str


class EngineWorker(Worker):
    def __init__(self, conn: Connection, loaded: Loaded, board: Board, tools: Tools) -> None:
        super().__init__(conn, board, tools)
        self.loaded = loaded

    def op_engine_run(self, request: dict[str, Any]) -> None:
        workload = EngineWorkload.from_dict(request["workload"])
        setup = EngineSetup.from_dict(request["setup"])
        trace = self.loaded.run(workload, setup, self.heartbeat)
        self.send(kind="result", value=trace.to_dict())


def serve(adapter: Adapter, argv: list[str] | None = None) -> None:
    """The worker's whole life; it never returns to the engine's atexit hooks or finalizers."""
    try:
        _main(adapter, sys.argv[1:] if argv is None else argv)
    finally:
        os._exit(0)


def _main(adapter: Adapter, argv: list[str]) -> None:
    conn, board, path, read = boxed(argv, adapter.before_box, adapter.preload)
    tools = bind(conn, board)
    if isinstance(read, LoadError):
        ready(tools, load_error=read.message)
        return
    try:
        loaded = adapter.in_box(path, read)
    except (Exception, SystemExit) as e:  # the engine's import: its fault, not ours
        ready(tools, load_error=f"{type(e).__name__}: {e}")
        return
    ready(tools, problems=[])
    EngineWorker(conn, loaded, board, tools).serve()
