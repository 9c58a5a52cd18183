"""Exhaustive mode by scope: states, transitions, the workloads a visited set saved, time.

Run: python -m bench.exhaustive [SCOPE ...]   (default: smoke small medium)
Each scope is explored on the reference loaded as a submission file, isolated, one worker
per core, as `schedcheck check --exhaustive` does; the scope's workloads are counted, not
run (running them is what the visited set saves). docs/performance.md keeps the numbers.
"""

from __future__ import annotations

import math
import os
import sys

from bench.isolation import SUBMISSION
from schedcheck.sandbox.process import Limits
from schedcheck.search.exhaustive import check_exhaustive
from schedcheck.strategies.exhaustive import SCOPES, Scope, plans


def workload_count(scope: Scope) -> int:
    """How many workloads the scope's enumeration holds: each plan of arrivals times its
    choices of eos (counted, not built: nightly's run into the millions)."""
    return sum(
        math.prod(r.max_tokens for r in plan)  # never, or at one of max_tokens - 1 places
        for space in scope.spaces()
        for plan in plans(space)
    )


def main(names: list[str]) -> None:
    jobs = os.cpu_count() or 1
    print(
        f"| scope | configs | workloads | states | transitions | runs saved | seconds "
        f"({jobs} cores) | transitions/s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        scope = SCOPES[name]
        scan = check_exhaustive(str(SUBMISSION), scope, jobs, Limits())
        assert scan.failure is None and scan.finished, f"the reference failed {name}"
        workloads = workload_count(scope)
        print(
            f"| {name} | {len(scope.spaces())} | {workloads:,} | {scan.states:,} | "
            f"{scan.edges:,} | {1 - scan.edges / workloads:.0%} | {scan.seconds:.1f} | "
            f"{scan.edges / scan.seconds:,.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:] or ["smoke", "small", "medium"])
