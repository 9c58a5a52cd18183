"""vLLM run in this process (`--in-process`), or in a sandboxed worker of its own, as every
engine is (schedcheck/sandbox/): the two `Runs` of `schedcheck engine --vllm`."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from schedcheck.engine.isolated import run_in
from schedcheck.engine.setup import EngineSetup
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.vllm.build import Build
from schedcheck.engine.vllm.drive import RUNNER, run_vllm, warm
from schedcheck.engine.vllm.worker import cache_root, calls
from schedcheck.engine.workload import EngineWorkload
from schedcheck.sandbox.process import Limits, Sandbox

WORKER = "schedcheck.engine.vllm.worker"
START = 300.0  # seconds to import vLLM and configure it (the first time, a model inspection)
MEMORY_MB = 8192  # torch and vLLM map gigabytes of address space before a step is run


class LocalVllm:
    isolation = "none"

    def __init__(self, setup: EngineSetup) -> None:
        self.setup = setup
        self.folder = tempfile.mkdtemp(prefix="schedcheck-vllm-")
        os.environ.setdefault("VLLM_CACHE_ROOT", str(cache_root()))
        self.build = Build(Path(self.folder))
        self.version = self.build.version
        warm(self.build)

    def run(self, workload: EngineWorkload) -> EngineTrace:
        return run_vllm(self.build, workload)

    def stop(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class IsolatedVllm:
    def __init__(self, setup: EngineSetup, limits: Limits | None = None) -> None:
        self.setup = setup
        self.folder = tempfile.mkdtemp(prefix="schedcheck-vllm-")
        path = Path(self.folder) / "vllm-setup.json"
        path.write_text(json.dumps({"root": setup.root}))
        limits = limits or Limits(memory=MEMORY_MB << 20)
        limits = replace(limits, start_timeout=max(limits.start_timeout, START))
        self.worker = Sandbox(path, limits, WORKER)
        try:
            self.worker.start()  # SubmissionError if vLLM does not even load
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    @property
    def isolation(self) -> str:
        return self.worker.isolation

    def run(self, workload: EngineWorkload) -> EngineTrace:
        return run_in(self.worker, workload, RUNNER, calls(workload))

    def stop(self) -> None:
        self.worker.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
