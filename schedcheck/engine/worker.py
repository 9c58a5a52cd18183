"""The engine's worker process: a nano-vllm checkout loaded and driven inside the box.

Started by `schedcheck.engine.isolated` as `python -m schedcheck.engine.worker` with the sandbox
worker's arguments (schedcheck/sandbox/worker.py), PATH being the box's own copy of the
checkout's `nanovllm/` sources. The sources are read before the box is entered; the engine
is loaded from memory inside it, driven with the simulated model runner, and each run's
trace goes back as plain data. The checks run in the parent.
"""

from __future__ import annotations

import json
import os
import sys
from multiprocessing.connection import Connection
from typing import Any

from schedcheck.engine.drive import bound, run_engine
from schedcheck.engine.loader import Engine, load_engine, read_sources
from schedcheck.engine.setup import EngineSetup
from schedcheck.engine.workload import EngineWorkload
from schedcheck.sandbox.beat import Board
from schedcheck.sandbox.worker import Worker, boxed

# What nano-vllm's scheduling modules import (xxhash and numpy when the extra is installed)
# and what the driver needs: after the privilege drop nothing new can be imported.
PRELOAD = ("array", "hashlib", "inspect", "pickle", "zlib", "xxhash", "numpy")


def calls(workload: EngineWorkload) -> int:
    """Calls into the engine a run makes at most: Scheduler(); SamplingParams(), Sequence()
    and add() per request; is_finished(), schedule(), postprocess() and a pickle per
    scheduled sequence per step, up to the bound and one more."""
    per_step = 3 + workload.config.max_num_seqs
    return 1 + 3 * len(workload.requests) + (bound(workload) + 2) * per_step


class EngineWorker(Worker):
    def __init__(self, conn: Connection, engine: Engine, board: Board) -> None:
        super().__init__(conn, board)
        self.engine = engine

    def op_engine_run(self, request: dict[str, Any]) -> None:
        workload = EngineWorkload.from_dict(request["workload"])
        setup = EngineSetup.from_dict(request["setup"])
        trace = run_engine(self.engine, workload, setup, self.heartbeat)
        self.send(kind="result", value=trace.to_dict())


def main(argv: list[str]) -> None:
    # PATH is the copy of the engine's package folder (nanovllm/, or a fork's own name).
    conn, board, path, sources = boxed(argv, read_sources, PRELOAD)
    try:
        engine = load_engine(os.path.dirname(path), sources, os.path.basename(path))
    except (Exception, SystemExit) as e:
        message = f"{type(e).__name__}: {e}"
        conn.send_bytes(json.dumps({"kind": "ready", "load_error": message, "serial": 0}).encode())
        return
    conn.send_bytes(json.dumps({"kind": "ready", "problems": [], "serial": 0}).encode())
    EngineWorker(conn, engine, board).serve()


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    finally:
        os._exit(0)  # never run the engine's atexit hooks or finalizers
