"""How long the checks take on a long trace: 100 requests, about 1,000 steps.

Run: python -m bench.check_cost
Prints the trace's size, the time to run the reference on it (driver and snapshots
included), and the time of every check (R1 against a second reference trace, D1 with its
never-preempting twin): medians of 5 repetitions.
"""

from __future__ import annotations

import random
import statistics
import time

from schedcheck.drive.driver import run
from schedcheck.drive.loader import load_impl
from schedcheck.invariants.checks import check_trace
from schedcheck.model.workload import Config, Request, Workload

REPEATS = 5


def long_workload(requests: int = 100, seed: int = 0) -> Workload:
    """Requests arriving every few steps onto tight blocks: preemption all along."""
    rng = random.Random(seed)
    reqs = tuple(
        Request(f"s{i}", rng.randint(1, 40), rng.randint(1, 30), arrival=1 + i * 9)
        for i in range(requests)
    )
    return Workload(Config(30, 4, 6, 24), reqs)


def median_seconds(action: object) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        action()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    reference = load_impl()
    workload = long_workload()
    trace = run(reference, workload)
    twin = run(reference, workload.unconstrained())
    expected = run(reference, workload)
    final = trace.final()
    assert final is not None
    calls = sum(2 + (step.again is not None) for step in trace.steps)
    run_s = median_seconds(lambda: run(reference, workload))
    check_s = median_seconds(lambda: check_trace(trace, expected, twin))
    print(
        f"trace: {len(workload.requests)} requests, {len(trace.steps)} steps, {calls} calls, "
        f"{final.num_preemptions} preemptions"
    )
    print(f"run (driver + snapshots): {run_s:.3f} s")
    print(f"all checks (C1 I1-I7 A1 F1 L1 D1 R1): {check_s:.3f} s")
    assert not check_trace(trace, expected, twin), "the reference fails its own checks"


if __name__ == "__main__":
    main()
