"""An engine run in a sandboxed worker of its own, like a submission (schedcheck/sandbox/):
its adapter's worker loads it inside the box and sends each run's trace back as plain data;
a hang, a crash or garbage is the run's failure (E6), with the step and call the worker's
heartbeat named.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from schedcheck.engine.adapter import Adapter, EngineSetup
from schedcheck.engine.trace import EngineFailure, EngineTrace
from schedcheck.engine.traits import Traits
from schedcheck.engine.workload import EngineWorkload
from schedcheck.faults import SubmissionFailure
from schedcheck.sandbox.process import Limits, Sandbox

__all__ = ["IsolatedEngine"]


class IsolatedEngine:
    """`adapter`'s engine as `setup` says, in its worker (SubmissionError if it does not
    even load)."""

    def __init__(self, adapter: Adapter, setup: EngineSetup, limits: Limits | None = None) -> None:
        self.adapter, self.setup = adapter, setup
        self.traits: Traits = adapter.traits(setup)
        limits = limits or Limits(memory=adapter.memory_mb << 20)
        limits = replace(limits, start_timeout=max(limits.start_timeout, adapter.start_timeout))
        self.scratch = Path(tempfile.mkdtemp(prefix="schedcheck-engine-"))
        try:
            self.worker = Sandbox(
                adapter.box(setup, self.scratch), limits, adapter.worker, what="the engine"
            )
            self.worker.start()
        except BaseException:
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise

    @property
    def isolation(self) -> str:
        return self.worker.isolation

    @property
    def output(self) -> str:
        return self.worker.output

    def use(self, setup: EngineSetup) -> None:
        """Run with `setup` from now on (what its adapter settled after trial runs)."""
        self.setup, self.traits = setup, self.adapter.traits(setup)

    def run(self, workload: EngineWorkload) -> EngineTrace:
        most = self.adapter.calls(workload)
        return run_in(self.worker, workload, self.traits, most, setup=self.setup.to_dict())

    def stop(self) -> None:
        self.worker.stop()
        shutil.rmtree(self.scratch, ignore_errors=True)


def run_in(
    worker: Sandbox, workload: EngineWorkload, traits: Traits, most: int, **fields: object
) -> EngineTrace:
    """One `engine_run` in `worker` (at most `most` calls into the engine; `fields` sent
    beside the workload): its trace, or E6 for a hang, a crash or garbage, with the step
    and call the worker's heartbeat named."""
    try:
        value = worker.request(most, op="engine_run", workload=workload.to_dict(), **fields)
    except SubmissionFailure as e:
        f = e.failure
        return EngineTrace(workload, traits, failure=EngineFailure("E6", f.step, f.call, f.message))
    try:
        trace = EngineTrace.from_dict(value)
    except (KeyError, TypeError, ValueError, AttributeError):
        trace = None
    if trace is None or trace.workload != workload:
        worker.stop()
        message = "the worker sent something that is not this run's trace"
        return EngineTrace(workload, traits, failure=EngineFailure("E6", 0, "engine run", message))
    return trace
