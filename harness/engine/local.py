"""An engine run in this very process (trusted code: our own test engines, --in-process)."""

from __future__ import annotations

from harness.engine.drive import run_engine
from harness.engine.loader import Engine, load_engine
from harness.engine.setup import EngineSetup
from invariants.engine.trace import EngineTrace
from invariants.engine.workload import EngineWorkload


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
