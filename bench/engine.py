"""Engine mode: examples per second on nano-vllm's API and on vLLM's and SGLang's own
schedulers, beside P07's.

Run: python -m bench.engine [PATH]
Where torch is installed, the same workloads through the engine's own step (the correct
engine with the rest of an engine over it, tests/engine_subjects/engine: its LLMEngine and
ModelRunner), with a worker rank and without, each as a share of the scheduler loop's rate
(issue 39's target: at least half); with PATH, both loops on it.
The same 500 generated engine workloads are checked (every check) on the correct
engine written here in nano-vllm's API (tests/engine_subjects/correct/), in this process and in
an isolated worker; medians of 3. P07's figures come from bench.isolation on the same
machine, for comparison. With PATH (a nano-vllm checkout, say its main), also
`schedcheck engine PATH`'s own search, 1,000 workloads isolated, timed whole (issue 24's
target: at most 30 s on 2 cores). Where vLLM is installed (.ci/install-vllm), 500 vLLM
workloads in each mode the release has (async and sync scheduling, each runner protocol;
every check) on its real scheduler, in this process and in its worker, the worker's
start-up (vLLM imported and configured before the box), and a whole `schedcheck engine
--engine vllm` in its default mode timed (issue 35's target: under a minute on 2 cores).
The same for SGLang where it is installed (.ci/install-sglang): each event loop, and a
whole `schedcheck engine --engine sglang`. docs/performance.md keeps the numbers.
"""

from __future__ import annotations

import importlib.util
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from bench.isolation import SUBMISSION, examples_per_second
from schedcheck.drive.impl import InProcess
from schedcheck.drive.isolated import Isolated
from schedcheck.drive.loader import load_impl
from schedcheck.engine.adapter import PLAIN, Features
from schedcheck.engine.checks import active
from schedcheck.engine.isolated import IsolatedEngine
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.nanovllm.adapter import ADAPTER as NANO_VLLM
from schedcheck.engine.nanovllm.config import read_setup
from schedcheck.engine.search import search_engine
from schedcheck.engine.strategies import engine_workloads
from schedcheck.engine.verdict import Runs, verify_engine
from schedcheck.engine.workload import EngineWorkload
from schedcheck.strategies.workloads import fixed_sample

# A correct engine of nano-vllm's shape, written here (read as data, not imported), and the
# rest of an engine over it (its LLMEngine, ModelRunner, a model needing a GPU).
SUBJECTS = Path(__file__).resolve().parent.parent / "tests" / "engine_subjects"
CORRECT, REST = SUBJECTS / "correct", SUBJECTS / "engine"

COUNT = 500


def engine_sample(
    count: int, features: Features = PLAIN, modes: tuple[str, ...] = ("",)
) -> list[EngineWorkload]:
    found: list[EngineWorkload] = []

    @given(engine_workloads(features=features, modes=modes))
    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    def collect(workload: EngineWorkload) -> None:
        found.append(workload)

    collect()
    return found


def engine_rate(
    engine: Runs, workloads: list[EngineWorkload], checks: list[str] | None = None
) -> float:
    start = time.perf_counter()
    for workload in workloads:
        assert verify_engine(engine, workload, checks).ok
    return len(workloads) / (time.perf_counter() - start)


def release_rates(name: str, package: str, every: dict[str, str]) -> str:
    """A real engine's lines (`name`: its adapter's registry name; `package`: what is
    installed), one per mode it has (`every`: the options that select them all), and a
    whole default run; or why there are none."""
    if importlib.util.find_spec(package) is None:
        return f"{package}: not installed here (.ci/install-{package})"
    import argparse
    import subprocess

    from schedcheck.engine import registry

    adapter = registry.adapter(name)
    checks = active(on=adapter.policies_on)
    setup = adapter.setup(None, argparse.Namespace(**every))
    local = LocalEngine(adapter, setup)
    setup = adapter.settle(setup, local.run)  # which drafters run where (trial runs)
    local.use(setup)
    start = time.perf_counter()
    isolated = IsolatedEngine(adapter, setup)
    started = time.perf_counter() - start
    lines = []
    try:
        for mode in setup.modes:
            # without drafts, then (issue 49) workloads that all draft, each with a drafter
            # the release runs in the mode: their rate beside the plain one
            plain = replace(adapter.features, drafts=0)
            workloads = engine_sample(COUNT, plain, (mode,))
            here = statistics.median(engine_rate(local, workloads, checks) for _ in range(3))
            boxed = statistics.median(engine_rate(isolated, workloads, checks) for _ in range(3))
            lines.append(
                f"{adapter.title} {version(package)} {mode} ({len(workloads)} workloads, every "
                f"check): in-process {here:.0f} examples/s, isolated {boxed:.0f} examples/s"
            )
            features = setup.features(adapter.features)
            if features.drafts and mode in features.draft_modes:
                sample = engine_sample(4 * COUNT, features, (mode,))
                drafting = [w for w in sample if w.drafts and w.config.mode == mode][:COUNT]
                rate = statistics.median(engine_rate(local, drafting, checks) for _ in range(3))
                lines.append(
                    f"  with drafts ({len(drafting)} workloads, drafters "
                    f"{', '.join(sorted({w.drafter for w in drafting}))}): in-process "
                    f"{rate:.0f} examples/s, {rate / here:.0%} of the plain rate"
                )
    finally:
        local.stop()
        isolated.stop()
    lines.append(f"its worker starts in {started:.1f} s (imported, warmed in every mode)")
    start = time.perf_counter()
    whole = subprocess.run(
        [sys.executable, "-m", "schedcheck", "engine", "--engine", name],
        capture_output=True,
        text=True,
    )
    took = time.perf_counter() - start
    last = whole.stdout.strip().splitlines()[-1] if whole.stdout.strip() else whole.stderr
    lines.append(f"schedcheck engine --engine {name} (1,000 workloads): {took:.1f} s: {last}")
    return "\n".join(lines)


def own_step_rates(workloads: list[EngineWorkload], scheduler: tuple[float, float]) -> str:
    """The same workloads through the engine's own step (issue 39: within twice the
    scheduler loop's time), beside the scheduler loop's rates measured before."""
    if importlib.util.find_spec("torch") is None:
        return "own step: torch is not installed here"
    root = Path(tempfile.mkdtemp(prefix="schedcheck-bench-"))
    shutil.copytree(CORRECT, root, dirs_exist_ok=True)
    shutil.copytree(REST, root, dirs_exist_ok=True)
    lines = []
    for label, config in (("2 ranks", []), ("1 rank", ["tensor_parallel_size=1"])):
        setup = read_setup(str(root), config=config)
        local, isolated = LocalEngine(NANO_VLLM, setup), IsolatedEngine(NANO_VLLM, setup)
        try:
            here = statistics.median(engine_rate(local, workloads) for _ in range(3))
            boxed = statistics.median(engine_rate(isolated, workloads) for _ in range(3))
        finally:
            isolated.stop()
        lines.append(
            f"own step ({label}): in-process {here:.0f} examples/s "
            f"({here / scheduler[0]:.2f} of the scheduler loop's), isolated {boxed:.0f} "
            f"examples/s ({boxed / scheduler[1]:.2f})"
        )
    shutil.rmtree(root, ignore_errors=True)
    return "\n".join(lines)


def main() -> None:
    workloads = engine_sample(COUNT)
    correct = read_setup(str(CORRECT))
    local, isolated = LocalEngine(NANO_VLLM, correct), IsolatedEngine(NANO_VLLM, correct)
    try:
        here = statistics.median(engine_rate(local, workloads) for _ in range(3))
        boxed = statistics.median(engine_rate(isolated, workloads) for _ in range(3))
    finally:
        isolated.stop()
    own = own_step_rates(workloads, (here, boxed))
    p07 = fixed_sample(300)
    worker = Isolated(SUBMISSION)
    worker.start()
    try:
        p07_here = examples_per_second(InProcess(load_impl(SUBMISSION), str(SUBMISSION)), p07)
        p07_boxed = examples_per_second(worker, p07)
    finally:
        worker.stop()
    print(
        f"engine (tests/engine_subjects/correct, {len(workloads)} workloads): in-process "
        f"{here:.0f} examples/s, isolated {boxed:.0f} examples/s"
    )
    print(
        f"P07 (the reference as a submission, 300 workloads): in-process {p07_here:.0f} "
        f"examples/s, isolated {p07_boxed:.0f} examples/s"
    )
    print(own)
    print(release_rates("vllm", "vllm", {"async_scheduling": None, "runner": None, "modes": "all"}))
    print(release_rates("sglang", "sglang", {"loop": None, "modes": "all"}))
    if len(sys.argv) > 1:
        for loop in ("scheduler", "own"):
            engine = IsolatedEngine(NANO_VLLM, read_setup(sys.argv[1], loop=loop))
            try:
                start = time.perf_counter()
                found = search_engine(engine, 1000)
                took = time.perf_counter() - start
            finally:
                engine.stop()
            failure = found.failure
            verdict = "PASS" if failure is None else f"FAIL {failure[1].violations[0]}"
            print(
                f"schedcheck engine {sys.argv[1]} --loop {loop}: {found.examples} workloads, "
                f"isolated, {took:.1f} s ({verdict})"
            )


if __name__ == "__main__":
    main()
