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

from schedcheck.engine.adapter import PLAIN, Features
from schedcheck.engine.strategies import engine_workloads, observe
from schedcheck.engine.verdict import EngineVerdict, Runs, Undrivable, verify_engine
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from schedcheck.search.hunt import SEARCH


@dataclass
class Search:
    examples: int = 0
    seconds: float = 0.0
    reached: Counter[str] = field(default_factory=Counter)  # label -> workloads reaching it
    failure: tuple[EngineWorkload, EngineVerdict] | None = None


def chunks_prefills(engine: Runs, block_size: int = 2) -> bool:
    """Whether the engine splits a prompt longer than the budget over steps (probed: one
    6-token prompt under a 4-token budget, in blocks of `block_size`, one it runs with).
    An engine that does not chunk cannot admit such a prompt at all, so its workloads keep
    the budget over every prefill."""
    if engine.traits.runner.span == "rest":
        return False  # its runner computes every prefill to the end
    config = EngineConfig(8, block_size, 1, 4)
    probe = EngineWorkload(config, (EngineRequest("r1", (1, 2) * 3, 1),), 2)
    try:
        trace = verify_engine(engine, probe).trace
    except Undrivable:
        return False  # it refuses a budget below its longest prompt (old nano-vllm's Config)
    if not trace.steps or not trace.steps[0].is_prefill or len(trace.steps[0].scheduled) != 1:
        return False
    return trace.steps[0].scheduled[0].num_scheduled < 6  # split: fewer than its 6 tokens


def search_engine(
    engine: Runs,
    examples: int = 1000,
    checks: list[str] | None = None,
    chunked: bool | None = None,
    features: Features = PLAIN,
    modes: tuple[str, ...] = ("",),
) -> Search:
    """`chunked`: whether the engine chunks prefills (default: probed); `features`: what its
    workloads draw (its adapter's); `modes`: the modes they are drawn in (its setup's)."""
    found = Search()
    start = time.monotonic()
    if chunked is None:
        chunked = chunks_prefills(engine, features.block_sizes[0])

    def fails(workload: EngineWorkload) -> bool:
        verdict = verify_engine(engine, workload, checks)
        found.examples += 1
        found.reached.update(observe(verdict.trace))
        return not verdict.ok

    options = settings(SEARCH, max_examples=examples)  # `check`'s hunt, derandomized
    try:
        strategy = engine_workloads(whole_prefill=not chunked, features=features, modes=modes)
        workload = find(strategy, fails, settings=options)
        found.failure = (workload, verify_engine(engine, workload, checks))
    except NoSuchExample:
        pass
    found.seconds = time.monotonic() - start
    return found
