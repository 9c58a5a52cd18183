"""Hunt a bug the way `schedcheck check` does: Hypothesis searches the suite's strategies
for a workload that fails, with the implementation in an isolated worker, and shrinks it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, find, settings
from hypothesis.strategies import SearchStrategy

from schedcheck.drive.isolated import Isolated
from schedcheck.invariants.checks import CHECKS
from schedcheck.model.workload import Workload
from schedcheck.sandbox.process import Limits
from schedcheck.strategies.workloads import any_workloads
from schedcheck.verdict.verify import Verdict, verify

SEARCH = settings(
    max_examples=2000,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@dataclass(frozen=True)
class Caught:
    """The shrunk failing workload, what the checks said of it, and the time it took."""

    workload: Workload
    verdict: Verdict
    seconds: float

    @property
    def check(self) -> str:
        return self.verdict.violations[0].check

    @property
    def steps(self) -> int:
        return len(self.verdict.trace.steps)

    @property
    def requests(self) -> int:
        return len(self.workload.requests)


def hunt(
    path: Path,
    limits: Limits | None = None,
    search: settings = SEARCH,
    workloads: SearchStrategy[Workload] | None = None,
    checks: tuple[str, ...] | None = None,
) -> Caught:
    """Find and shrink a failing workload for the submission at `path`, among `workloads`
    (by default the properties stage's), by `checks` (by default every one).

    Raises hypothesis.errors.NoSuchExample if none of the search's workloads fails.
    """
    worker = Isolated(path, limits or Limits(call_timeout=0.5))
    start = time.monotonic()
    try:
        searched = any_workloads() if workloads is None else workloads
        judged = tuple(CHECKS) if checks is None else checks
        workload = find(searched, lambda w: not verify(worker, w, judged).ok, settings=search)
        verdict = verify(worker, workload, judged)
    finally:
        worker.stop()
    return Caught(workload, verdict, time.monotonic() - start)
