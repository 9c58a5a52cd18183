"""Search an engine for a failing workload with Hypothesis, shrink it, count what was reached.

Derandomized: the same engine gets the same search and the same counterexample on every
run, which a CI gate and a bug report both need.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from hypothesis import find, settings
from hypothesis.errors import NoSuchExample

from harness.engine.verdict import EngineVerdict, Runs, verify_engine
from harness.search.hunt import SEARCH
from invariants.engine.workload import EngineWorkload
from strategies.engine import engine_workloads, observe


@dataclass
class Search:
    examples: int = 0
    seconds: float = 0.0
    reached: Counter[str] = field(default_factory=Counter)  # label -> workloads reaching it
    failure: tuple[EngineWorkload, EngineVerdict] | None = None


def search_engine(engine: Runs, examples: int = 1000) -> Search:
    found = Search()
    start = time.monotonic()

    def fails(workload: EngineWorkload) -> bool:
        verdict = verify_engine(engine, workload)
        found.examples += 1
        found.reached.update(observe(verdict.trace))
        return not verdict.ok

    options = settings(SEARCH, max_examples=examples)  # `check`'s hunt, derandomized
    try:
        strategy = engine_workloads(whole_prefill=engine.generation() == "whole")
        workload = find(strategy, fails, settings=options)
        found.failure = (workload, verify_engine(engine, workload))
    except NoSuchExample:
        pass
    found.seconds = time.monotonic() - start
    return found
