"""Grading throughput (issue 56): a class graded as a teacher grades it, and where the time
of one submission goes.

Run: python -m bench.grading [--students N] [--jobs J]
Prints the wall time of `grade_many` on a class of N submissions (the correct equivalents
and the catalogue's mutants, taken in turn; default 20), the seconds a submission, what
that makes of a class of 300 on J cores (default 2; the goal is 10 minutes), the one-off
collection of check's runs, and the share of one correct submission's grading each stage
of check takes (the parent's CPU and the worker's, per stage's runs).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from schedcheck.drive.isolated import Isolated
from schedcheck.drive.standalone import standalone
from schedcheck.grading.grade import SAMPLE_SIZE, grade_many, reference_trace
from schedcheck.sandbox.process import Limits
from schedcheck.suite.tried import tried
from schedcheck.verdict.verify import verify

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


def stage_shares(path: str) -> dict[str, float]:
    """Seconds of CPU (ours and the worker's) each stage's runs take on `path`."""
    worker = Isolated(path, Limits())
    worker.start()
    seconds: dict[str, float] = defaultdict(float)
    try:
        for run in tried(SAMPLE_SIZE):
            start, used = time.process_time(), worker.used()
            lockstep = run.script is None and "R1" in run.checks
            expected = reference_trace(run.workload) if lockstep else None
            verify(worker, run.workload, run.checks, script=run.script, expected=expected)
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
        entries = grade_many(paths, args.jobs, Limits(), 300.0)
        wall = time.perf_counter() - start
        verdicts = [e.verdict.value for e in entries]
        print(
            f"{len(paths)} submissions ({verdicts.count('pass')} pass, {verdicts.count('fail')} "
            f"fail, {verdicts.count('error')} error) in {wall:.1f} s with {args.jobs} jobs: "
            f"{wall / len(paths):.2f} s a submission, 300 in {300 * wall / len(paths) / 60:.1f} "
            "min"
        )
        shares = stage_shares(paths[0])
    total = sum(shares.values())
    print(f"one correct submission's runs: {total:.1f} s of CPU")
    for stage, spent in shares.items():
        print(f"  {stage:24s} {spent:5.2f} s  {100 * spent / total:3.0f}%")


if __name__ == "__main__":
    main()
