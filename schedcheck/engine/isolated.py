"""An engine run in a sandboxed worker of its own, like a submission (schedcheck/sandbox/).

The worker loads the checkout inside its box and sends each run's trace back as plain
data; a hang, a crash or garbage is the run's failure (E6), with the step and call the
worker's heartbeat named.
"""

from __future__ import annotations

from schedcheck.engine.setup import EngineSetup
from schedcheck.engine.trace import EngineFailure, EngineTrace
from schedcheck.engine.worker import calls
from schedcheck.engine.workload import EngineWorkload
from schedcheck.faults import SubmissionFailure
from schedcheck.sandbox.process import Limits, Sandbox

WORKER = "schedcheck.engine.worker"


class IsolatedEngine:
    def __init__(self, setup: EngineSetup, limits: Limits | None = None) -> None:
        self.setup = setup
        self.worker = Sandbox(setup.folder, limits, WORKER)
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
                calls(workload),
                op="engine_run",
                workload=workload.to_dict(),
                setup=self.setup.to_dict(),
            )
        except SubmissionFailure as e:
            f = e.failure
            return EngineTrace(
                workload, self.setup.runner, failure=EngineFailure("E6", f.step, f.call, f.message)
            )
        try:
            trace = EngineTrace.from_dict(value)
        except (KeyError, TypeError, ValueError, AttributeError):
            trace = None
        if trace is None or trace.workload != workload:
            self.worker.stop()
            return EngineTrace(
                workload,
                self.setup.runner,
                failure=EngineFailure(
                    "E6", 0, "engine run", "the worker sent something that is not this run's trace"
                ),
            )
        return trace

    def stop(self) -> None:
        self.worker.stop()
