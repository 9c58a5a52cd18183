"""Bounded-exhaustive checking over a scope: every space explored, spread over processes.

Each process opens the submission once (its own isolated worker) and explores its share
of the spaces breadth-first across them. A failure tells the others to stop before the
next depth; the one reported is the failure of the fewest steps, then of the first space
in the scope's order: the same on every run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.util import Finalize
from typing import Any

from schedcheck.drive.impl import Implementation, open_impl
from schedcheck.model.workload import Workload
from schedcheck.sandbox.process import Limits
from schedcheck.search.explore import Exploration, explore
from schedcheck.strategies.exhaustive import Scope, Space
from schedcheck.verdict.verify import Verdict


@dataclass(frozen=True)
class Scan:
    """What an exhaustive check covered, and the shortest failure it found (if any)."""

    states: int  # distinct canonical states reached
    edges: int  # transitions checked, one whole workload each
    seconds: float
    failure: tuple[Workload, Verdict] | None = None
    finished: bool = False  # every reachable state explored (a pass, when no failure)


def explore_spaces(impl: Implementation, spaces: Sequence[Space]) -> Scan:
    """The spaces in this process, breadth-first across them."""
    start = time.monotonic()
    return _total([explore(impl, spaces)], time.monotonic() - start, list(spaces))


def check_exhaustive(
    path: str, scope: Scope, jobs: int, limits: Limits, in_process: bool = False
) -> Scan:
    """Every space of `scope` on the submission at `path`, in `jobs` processes: each takes
    every jobs-th space, largest first, so the shares are alike."""
    start = time.monotonic()
    context = get_context("spawn")
    failed = context.Value("i", _NONE)  # the smallest depth at which a failure was found
    order = scope.spaces()
    spaces = sorted(order, key=_weight, reverse=True)
    shares = [spaces[k::jobs] for k in range(jobs) if spaces[k::jobs]]
    found: list[Exploration] = []
    opening = (path, in_process, limits, failed)
    with ProcessPoolExecutor(len(shares), context, _open, opening) as pool:
        pending: set[Future[Exploration]] = {pool.submit(_explore, share) for share in shares}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            found += [future.result() for future in done]  # our own error propagates: exit 3
    return _total(found, time.monotonic() - start, order)


def _total(found: list[Exploration], seconds: float, order: list[Space]) -> Scan:
    """The failure of the fewest steps, then of the first space in the scope's order: each
    process finished every depth up to the smallest failing one, so this is the same
    failure on every run, however the processes were timed."""
    failing = [(f.depth, order.index(f.space), f.failure) for f in found if f.space]
    shortest = min(failing, key=lambda f: f[:2], default=(0, 0, None))[2]
    return Scan(
        sum(f.states for f in found),
        sum(f.edges for f in found),
        seconds,
        shortest,
        all(f.finished for f in found),
    )


def _weight(space: Space) -> tuple[int, int, int]:
    """A guess at a space's size, to deal the big ones out first."""
    return len(space.kinds), space.config.max_num_seqs, space.config.num_blocks


# One submission per pool process, opened by the initializer, stopped when it exits.
_NONE = 1 << 30
_impl: Implementation | None = None
_failed: Any = None  # a multiprocessing Value: the smallest failing depth so far


def _open(path: str, in_process: bool, limits: Limits, failed: Any) -> None:
    global _impl, _failed
    _impl, _failed = open_impl(path, in_process, limits), failed
    Finalize(None, _impl.stop, exitpriority=10)


def _explore(spaces: list[Space]) -> Exploration:
    assert _impl is not None and _failed is not None, "the pool's initializer opens it"
    found = explore(_impl, spaces, stop=lambda depth: depth > _failed.value)
    if found.failure is not None:
        with _failed.get_lock():
            _failed.value = min(_failed.value, found.depth)  # the others stop past it
    return found
