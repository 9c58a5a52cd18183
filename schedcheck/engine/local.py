"""An engine run in this very process (trusted code: our own test engines, --in-process)."""

from __future__ import annotations

from schedcheck.engine.drive import run_engine
from schedcheck.engine.loader import Engine, load_engine
from schedcheck.engine.setup import EngineSetup
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.workload import EngineWorkload


class LocalEngine:
    isolation = "none"

    def __init__(self, setup: EngineSetup) -> None:
        self.setup = setup
        self.engine: Engine = load_engine(setup.root, package=setup.package)

    def run(self, workload: EngineWorkload) -> EngineTrace:
        self.engine.install()
        return run_engine(self.engine, workload, self.setup)

    def stop(self) -> None:
        """Nothing to stop: it runs here."""
