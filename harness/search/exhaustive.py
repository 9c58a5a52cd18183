"""Bounded-exhaustive checking: every workload of a scope, spread over processes.

Chunk k of n takes the workloads whose index is k modulo n, so chunks are balanced and the
same on every run. A failure reported is the smallest failing workload found: fewest
requests, then shortest prompts and outputs, then smallest config.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context

from harness.sandbox.impl import Implementation, open_impl
from harness.sandbox.isolation import Limits
from harness.verdict.verify import Verdict, verify
from invariants.workload import Workload
from strategies.exhaustive import SCOPES, enumerate_scope


@dataclass(frozen=True)
class Scan:
    """How many workloads a chunk covered, and its smallest failure (if any)."""

    count: int
    failure: tuple[Workload, Verdict] | None = None


def scan_chunk(
    impl: Implementation, scope: str, chunk: int, chunks: int, first: bool = False
) -> Scan:
    """Chunk `chunk` of `chunks`; with `first`, stop at the first failure."""
    count, smallest = 0, None
    for index, workload in enumerate(enumerate_scope(SCOPES[scope])):
        if index % chunks != chunk:
            continue
        count += 1
        if smallest is not None and workload.size() >= smallest[0].size():
            continue  # it could not be smaller: no need to run it
        verdict = verify(impl, workload)
        if not verdict.ok:
            smallest = (workload, verdict)
            if first:
                break
    return Scan(count, smallest)


def _scan_file(
    path: str, in_process: bool, limits: Limits, scope: str, chunk: int, chunks: int
) -> Scan:
    impl = open_impl(path, in_process, limits)
    try:
        return scan_chunk(impl, scope, chunk, chunks)
    finally:
        impl.stop()


def check_exhaustive(
    path: str, scope: str, jobs: int, limits: Limits, in_process: bool = False
) -> Scan:
    """Every workload of `scope` on the submission at `path`, `jobs` processes at once."""
    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
        futures = [
            pool.submit(_scan_file, path, in_process, limits, scope, k, jobs) for k in range(jobs)
        ]
        scans = [f.result() for f in futures]
    failures = [s.failure for s in scans if s.failure is not None]
    smallest = min(failures, key=lambda f: f[0].size(), default=None)
    return Scan(sum(s.count for s in scans), smallest)
