"""An engine run in this very process (trusted code: our own test engines, --in-process)."""

from __future__ import annotations

from schedcheck.engine.adapter import Adapter, EngineSetup
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.traits import Traits
from schedcheck.engine.workload import EngineWorkload

__all__ = ["LocalEngine"]


class LocalEngine:
    isolation = "none"

    def __init__(self, adapter: Adapter, setup: EngineSetup) -> None:
        self.adapter, self.setup = adapter, setup
        self.traits: Traits = adapter.traits(setup)
        self.loaded = adapter.load(setup)  # raises what its import raised: the engine's fault

    def use(self, setup: EngineSetup) -> None:
        """Run with `setup` from now on (what its adapter settled after trial runs)."""
        self.setup, self.traits = setup, self.adapter.traits(setup)

    def run(self, workload: EngineWorkload) -> EngineTrace:
        return self.loaded.run(workload, self.setup, None)

    def stop(self) -> None:
        """Nothing to stop: it runs here."""
