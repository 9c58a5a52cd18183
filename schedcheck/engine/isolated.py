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
        return run_in(
            self.worker, workload, self.setup.runner, calls(workload), setup=self.setup.to_dict()
        )

    def stop(self) -> None:
        self.worker.stop()


def run_in(
    worker: Sandbox, workload: EngineWorkload, runner: str, most: int, **fields: object
) -> EngineTrace:
    """One `engine_run` in `worker` (at most `most` calls into the engine; `fields` sent
    beside the workload): its trace, or E6 for a hang, a crash or garbage, with the step
    and call the worker's heartbeat named."""
    try:
        value = worker.request(most, op="engine_run", workload=workload.to_dict(), **fields)
    except SubmissionFailure as e:
        f = e.failure
        return EngineTrace(workload, runner, failure=EngineFailure("E6", f.step, f.call, f.message))
    try:
        trace = EngineTrace.from_dict(value)
    except (KeyError, TypeError, ValueError, AttributeError):
        trace = None
    if trace is None or trace.workload != workload:
        worker.stop()
        message = "the worker sent something that is not this run's trace"
        return EngineTrace(workload, runner, failure=EngineFailure("E6", 0, "engine run", message))
    return trace
