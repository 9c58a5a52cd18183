"""An engine run in an isolated worker of its own, like a submission (harness/sandbox/).

The worker loads the checkout inside its box and sends each run's trace back as plain
data; a hang, a crash or garbage is the run's failure (E6), with the step and call the
worker's heartbeat named.
"""

from __future__ import annotations

from pathlib import Path

from harness import layout
from harness.engine.worker import calls
from harness.faults import SubmissionFailure
from harness.sandbox.isolation import Isolated, Limits
from invariants.engine.trace import EngineFailure, EngineTrace
from invariants.engine.workload import EngineWorkload

WORKER = layout.module("harness.engine.worker")


class IsolatedEngine:
    def __init__(self, root: str | Path, limits: Limits | None = None) -> None:
        self.worker = Isolated(Path(root).resolve() / "nanovllm", limits, WORKER)
        self.worker.start()  # SubmissionError if the engine does not even load

    @property
    def isolation(self) -> str:
        return self.worker.isolation

    @property
    def output(self) -> str:
        return self.worker.output

    def run(self, workload: EngineWorkload) -> EngineTrace:
        try:
            value = self.worker.request(
                calls(workload), op="engine_run", workload=workload.to_dict()
            )
        except SubmissionFailure as e:
            f = e.failure
            return EngineTrace(
                workload, "unknown", failure=EngineFailure("E6", f.step, f.call, f.message)
            )
        try:
            trace = EngineTrace.from_dict(value)
        except (KeyError, TypeError, ValueError, AttributeError):
            trace = None
        if trace is None or trace.workload != workload:
            self.worker.stop()
            return EngineTrace(
                workload,
                "unknown",
                failure=EngineFailure(
                    "E6", 0, "engine run", "the worker sent something that is not this run's trace"
                ),
            )
        return trace

    def generation(self) -> str:
        """The engine's generation, as its worker reads it (its code runs there only)."""
        try:
            return str(self.worker.request(1, op="engine_generation"))
        except SubmissionFailure as e:
            return f"unknown: {e.failure.message}"

    def stop(self) -> None:
        self.worker.stop()
