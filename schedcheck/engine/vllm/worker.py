"""vLLM's worker process: vLLM imported and configured, then the box entered, then driven.

Started by `schedcheck.engine.vllm.isolated` as `python -m schedcheck.engine.vllm.worker`
with the sandbox worker's arguments (schedcheck/sandbox/worker.py), PATH a JSON file naming
the folder to import vLLM from. Everything vLLM reads from disk (its modules, the model's
config.json, its lazy imports) is read before the box is entered: after it, the box's own
/tmp hides the machine's files and its uid may read nothing new. Each run's trace goes back
as plain data; the checks run in the parent.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from schedcheck.engine.drive import bound
from schedcheck.engine.vllm.build import Build
from schedcheck.engine.vllm.drive import run_vllm, warm
from schedcheck.engine.workload import EngineWorkload
from schedcheck.sandbox.beat import Board
from schedcheck.sandbox.worker import Worker, boxed


def calls(workload: EngineWorkload) -> int:
    """Calls into vLLM a run makes at most: Scheduler(); Request(), add_request() and an abort
    per request; a count, schedule() and update_from_output() per step, up to the bound."""
    return 1 + 3 * len(workload.requests) + (bound(workload) + 2) * 3


def cache_root() -> Path:
    """Where vLLM keeps what it learnt of the model (its class inspected in a subprocess,
    seconds): shared by this user's workers."""
    return Path(tempfile.gettempdir()) / f"schedcheck-vllm-{os.getuid()}"


def prepare(path: str) -> Build:
    root = json.loads(Path(path).read_text())["root"]
    if root not in sys.path:
        sys.path.insert(0, root)
    folder = Path(tempfile.mkdtemp(prefix="schedcheck-vllm-"))
    os.environ.setdefault("VLLM_CACHE_ROOT", str(cache_root()))
    try:
        build = Build(folder)
        warm(build)
    finally:  # the model's config.json is read by now; the box would hide it anyway
        shutil.rmtree(folder, ignore_errors=True)
    return build


class VllmWorker(Worker):
    def __init__(self, conn: Connection, build: Build, board: Board) -> None:
        super().__init__(conn, board)
        self.build = build

    def op_engine_run(self, request: dict[str, Any]) -> None:
        workload = EngineWorkload.from_dict(request["workload"])
        trace = run_vllm(self.build, workload, self.heartbeat)
        self.send(kind="result", value=trace.to_dict())


def main(argv: list[str]) -> None:
    conn, board, _, build = boxed(argv, _prepared)
    if isinstance(build, str):
        conn.send_bytes(json.dumps({"kind": "ready", "load_error": build, "serial": 0}).encode())
        return
    conn.send_bytes(
        json.dumps(
            {"kind": "ready", "problems": [], "serial": 0, "version": build.version}
        ).encode()
    )
    VllmWorker(conn, build, board).serve()


def _prepared(path: str) -> Build | str:
    try:
        return prepare(path)
    except (Exception, SystemExit) as e:
        return f"{type(e).__name__}: {e}"


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    finally:
        os._exit(0)  # never run vLLM's atexit hooks or finalizers
