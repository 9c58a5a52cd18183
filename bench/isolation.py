"""Isolated vs in-process checking: examples per second on the same workloads.

Run: python -m bench.isolation
The same 300 generated workloads are checked (every check, R1 included) on the reference
loaded as a submission file, once in this process and once in an isolated worker.
Medians of 3 repetitions; the goal is a ratio of at least 0.5.
"""

from __future__ import annotations

import statistics
import time

from schedcheck.drive.impl import Implementation, InProcess
from schedcheck.drive.isolated import Isolated
from schedcheck.drive.loader import load_impl
from schedcheck.drive.standalone import reference_file
from schedcheck.model.workload import Workload
from schedcheck.strategies.workloads import fixed_sample
from schedcheck.verdict.verify import verify

SUBMISSION = reference_file()  # the reference as one standalone file, as a box loads it
COUNT = 300


def examples_per_second(impl: Implementation, workloads: list[Workload]) -> float:
    start = time.perf_counter()
    for workload in workloads:
        assert verify(impl, workload).ok
    return len(workloads) / (time.perf_counter() - start)


def main() -> None:
    workloads = fixed_sample(COUNT)
    in_process = InProcess(load_impl(SUBMISSION), str(SUBMISSION))
    isolated = Isolated(SUBMISSION)
    isolated.start()
    try:
        local = statistics.median(examples_per_second(in_process, workloads) for _ in range(3))
        remote = statistics.median(examples_per_second(isolated, workloads) for _ in range(3))
    finally:
        isolated.stop()
    print(f"in-process: {local:.0f} examples/s; isolated: {remote:.0f} examples/s")
    print(f"isolated/in-process = {remote / local:.2f} (goal >= 0.5)")


if __name__ == "__main__":
    main()
