"""Grading throughput (issue 56): a class graded as a teacher grades it, and where the time
of one submission goes.

Run: python -m bench.grading [--students N] [--jobs J]
Prints the wall time of grading a class of N submissions (the correct equivalents and the
catalogue's mutants, taken in turn; default 20) J at a time as `grade_many` does (default
2; the goal is 300 in 10 minutes), the seconds a submission, what that makes of a class of
300, the CPU seconds each submission's grading took (the grader's and its workers': what
another process on the machine does not change), the one-off collection of check's runs,
and the share of one correct submission's grading each stage of check takes (the parent's
CPU and the worker's, per stage's runs).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from schedcheck.drive.isolated import Isolated
from schedcheck.drive.standalone import standalone
from schedcheck.grading.grade import SAMPLE_SIZE, case, check_case, grade_one, reference_trace
from schedcheck.grading.report import Entry
from schedcheck.sandbox import process
from schedcheck.sandbox.process import Limits, Sandbox
from schedcheck.suite.tried import Run, tried

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENTS = ROOT / "tests" / "equivalents"
MUTANTS = ROOT / "tests" / "mutants"


def a_class(students: int, folder: Path) -> list[str]:
    """`students` submission files, one folder each: equivalents and mutants in turn."""
    correct = sorted(EQUIVALENTS.glob("*.py"))
    wrong = sorted(MUTANTS.glob("*.py"))
    paths = []
    for k in range(students):
        pool = correct if k % 2 == 0 else wrong
        source = pool[(k // 2) % len(pool)]
        target = folder / f"student{k:03d}"
        target.mkdir()
        written = standalone(source, target)
        paths.append(str(written.rename(target / "p07_scheduler.py")))
    return paths


def graded(path: str, runs: tuple[Run, ...]) -> tuple[Entry, float]:
    """grade_one as grade_many calls it, and the CPU seconds it took: this process's and
    every worker's it started (Sandbox.used: the kernel's count, whatever else runs)."""
    started: list[Sandbox] = []
    init = Sandbox.__init__

    def noted(self: Sandbox, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        started.append(self)

    process.Sandbox.__init__ = noted  # type: ignore[method-assign]
    try:
        start = time.process_time()
        entry = grade_one(path, Limits(), 300.0, SAMPLE_SIZE, runs)
        return entry, time.process_time() - start + sum(s.used() for s in started)
    finally:
        process.Sandbox.__init__ = init  # type: ignore[method-assign]


def grade_class(paths: list[str], jobs: int, runs: tuple[Run, ...]) -> list[tuple[Entry, float]]:
    """grade_many's pool (spawned processes, `jobs` at a time), each submission timed."""
    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
        return list(pool.map(graded, paths, [runs] * len(paths)))


def stage_shares(path: str) -> dict[str, float]:
    """Seconds of CPU (ours and the worker's) each stage's runs take on `path`, a grader
    process's steady state: what it makes once for all it grades (the reference's traces
    R1 needs, their streams) made by a first pass, the second measured."""
    runs = tried(SAMPLE_SIZE)
    expected = [
        reference_trace(run.workload) if run.script is None and "R1" in run.checks else None
        for run in runs
    ]  # as grade_one's judge has them (a pair's other half: check_case)
    worker = Isolated(path, Limits())
    worker.start()
    seconds: dict[str, float] = defaultdict(float)
    try:
        for run, reference in zip(runs, expected, strict=True):  # the first pass
            check_case(worker, case(run), run.checks, reference)
        for run, reference in zip(runs, expected, strict=True):
            if run.other is not None:
                reference_trace(run.other)
            start, used = time.process_time(), worker.used()
            check_case(worker, case(run), run.checks, reference)
            seconds[run.stage] += time.process_time() - start + worker.used() - used
    finally:
        worker.stop()
    return dict(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    start = time.perf_counter()
    runs = tried(SAMPLE_SIZE)
    print(f"check's runs collected once: {len(runs):,} in {time.perf_counter() - start:.1f} s")
    with tempfile.TemporaryDirectory() as folder:
        paths = a_class(args.students, Path(folder))
        start = time.perf_counter()
        graded_class = grade_class(paths, args.jobs, runs)
        wall = time.perf_counter() - start
        verdicts = [e.verdict.value for e, _ in graded_class]
        print(
            f"{len(paths)} submissions ({verdicts.count('pass')} pass, {verdicts.count('fail')} "
            f"fail, {verdicts.count('error')} error) in {wall:.1f} s with {args.jobs} jobs: "
            f"{wall / len(paths):.2f} s a submission, 300 in {300 * wall / len(paths) / 60:.1f} "
            "min"
        )
        cpu = {v: [c for (e, c) in graded_class if e.verdict.value == v] for v in set(verdicts)}
        print(
            f"CPU a submission: {sum(c for _, c in graded_class) / len(paths):.2f} s ("
            + ", ".join(f"{v} {sum(c) / len(c):.2f} s" for v, c in sorted(cpu.items()))
            + ")"
        )
        shares = stage_shares(paths[0])
    total = sum(shares.values())
    print(f"one correct submission's runs: {total:.1f} s of CPU")
    for stage, spent in shares.items():
        print(f"  {stage:24s} {spent:5.2f} s  {100 * spent / total:3.0f}%")


if __name__ == "__main__":
    main()
