"""An implementation under test, as the checks see it: something that turns a workload into
a trace. In process for trusted code (the reference), in a worker for everything else."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Protocol, TypeVar

from schedcheck.drive.driver import play, run, run_pair
from schedcheck.drive.isolated import Isolated
from schedcheck.drive.loader import REFERENCE, load_impl
from schedcheck.model.trace import Trace
from schedcheck.model.workload import Script, Workload
from schedcheck.sandbox.process import Limits

_T = TypeVar("_T")


class Implementation(Protocol):
    label: str
    isolation: str  # the box's level: full, uid, process (docs/isolation.md); none in process
    output: str  # what it printed during the last run ("" when not captured)

    def run(self, workload: Workload) -> Trace: ...
    def run_while(self, workload: Workload, meanwhile: Callable[[], _T]) -> tuple[Trace, _T]:
        """run(workload), with `meanwhile()` called here while it runs where that can be."""
        ...

    def play(self, workload: Workload, script: Script) -> Trace:
        """The trace of `script`'s calls (schedcheck/drive/driver.py's play)."""
        ...

    def run_pair(self, first: Workload, second: Workload) -> tuple[Trace, Trace]:
        """Two schedulers alive at once (schedcheck/drive/driver.py's run_pair)."""
        ...

    def stop(self) -> None: ...


class InProcess:
    """A module run in this very process: only for code we trust."""

    output = ""
    isolation = "none"

    def __init__(self, module: ModuleType, label: str = REFERENCE) -> None:
        self.module = module
        self.label = label

    def run(self, workload: Workload) -> Trace:
        return run(self.module, workload)

    def run_while(self, workload: Workload, meanwhile: Callable[[], _T]) -> tuple[Trace, _T]:
        return self.run(workload), meanwhile()

    def play(self, workload: Workload, script: Script) -> Trace:
        return play(self.module, workload, script)

    def run_pair(self, first: Workload, second: Workload) -> tuple[Trace, Trace]:
        return run_pair(self.module, first, second)

    def stop(self) -> None:
        """Nothing to stop: it runs here."""


def reference() -> InProcess:
    return InProcess(load_impl())


def open_impl(
    where: str | Path = REFERENCE, in_process: bool = False, limits: Limits | None = None
) -> Implementation:
    """The reference (always in process), or a submission file: isolated unless asked not to."""
    if str(where) == REFERENCE:
        return reference()
    if in_process:
        return InProcess(load_impl(where), str(where))
    worker = Isolated(where, limits)
    worker.start()
    return worker
