"""Bounded-exhaustive checking over a scope: every space explored, spread over processes.

Each process opens the submission once (its own isolated worker) and explores its share
of the spaces breadth-first across them. The first failure tells the others to stop; the
one reported is the shortest found: the earliest step at which a check fired, then the
smallest workload.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.synchronize import Event
from multiprocessing.util import Finalize

from harness.sandbox.impl import Implementation, open_impl
from harness.sandbox.isolation import Limits
from harness.search.explore import Exploration, explore
from harness.verdict.verify import Verdict
from invariants.workload import Workload
from strategies.exhaustive import Scope, Space


@dataclass(frozen=True)
class Scan:
    """What an exhaustive check covered, and the shortest failure it found (if any)."""

    states: int  # distinct canonical states reached
    edges: int  # transitions checked, one whole workload each
    seconds: float
    failure: tuple[Workload, Verdict] | None = None
    finished: bool = False  # every reachable state explored (a pass, when no failure)


def explore_spaces(
    impl: Implementation, spaces: Sequence[Space], stop: Callable[[], bool] = lambda: False
) -> Scan:
    """The spaces in this process, breadth-first across them (tests, and each pool task)."""
    start = time.monotonic()
    return _total([explore(impl, spaces, stop=stop)], time.monotonic() - start)


def check_exhaustive(
    path: str, scope: Scope, jobs: int, limits: Limits, in_process: bool = False
) -> Scan:
    """Every space of `scope` on the submission at `path`, in `jobs` processes: each takes
    every jobs-th space, largest first, so the shares are alike."""
    start = time.monotonic()
    context = get_context("spawn")
    failed = context.Event()
    spaces = sorted(scope.spaces(), key=_weight, reverse=True)
    shares = [spaces[k::jobs] for k in range(jobs) if spaces[k::jobs]]
    found: list[Exploration] = []
    opening = (path, in_process, limits, failed)
    with ProcessPoolExecutor(len(shares), context, _open, opening) as pool:
        pending: set[Future[Exploration]] = {pool.submit(_explore, share) for share in shares}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            found += [future.result() for future in done]  # our own error propagates: exit 3
            if any(f.failure for f in found):
                failed.set()  # the others stop at their next path
    return _total(found, time.monotonic() - start)


def _total(found: list[Exploration], seconds: float) -> Scan:
    failures = [f.failure for f in found if f.failure is not None]
    shortest = min(failures, key=_shortness, default=None)
    return Scan(sum(f.states for f in found), sum(f.edges for f in found), seconds, shortest,
                all(f.finished for f in found))  # fmt: skip


def _shortness(failure: tuple[Workload, Verdict]) -> tuple[int, tuple[int, int, int]]:
    workload, verdict = failure
    return verdict.violations[0].step, workload.size()


def _weight(space: Space) -> tuple[int, int, int]:
    """A guess at a space's size, to deal the big ones out first."""
    return len(space.kinds), space.config.max_num_seqs, space.config.num_blocks


# One submission per pool process, opened by the initializer, stopped when it exits.
_impl: Implementation | None = None
_failed: Event | None = None


def _open(path: str, in_process: bool, limits: Limits, failed: Event) -> None:
    global _impl, _failed
    _impl, _failed = open_impl(path, in_process, limits), failed
    Finalize(None, _impl.stop, exitpriority=10)


def _explore(spaces: list[Space]) -> Exploration:
    assert _impl is not None and _failed is not None, "the pool's initializer opens it"
    return explore(_impl, spaces, stop=_failed.is_set)
