"""An engine run in this very process (trusted code: our own test engines, --in-process)."""

from __future__ import annotations

from pathlib import Path

from harness.engine.drive import generation, run_engine
from harness.engine.loader import Engine, load_engine
from invariants.engine.trace import EngineTrace
from invariants.engine.workload import EngineWorkload


class LocalEngine:
    isolation = "none"

    def __init__(self, root: str | Path) -> None:
        self.engine: Engine = load_engine(root)

    def run(self, workload: EngineWorkload) -> EngineTrace:
        self.engine.install()
        return run_engine(self.engine, workload)

    def generation(self) -> str:
        return generation(self.engine)

    def stop(self) -> None:
        """Nothing to stop: it runs here."""
