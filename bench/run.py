"""All of schedcheck's measurements, on this machine; writes them into docs/performance.md,
each between its markers (`<!-- bench.run N -->`), keeping what is written there by hand.

Run: python -m bench.run [--quick]
1. reference step cost with 1k, 10k and 100k waiting requests and a steady running set;
2. checking cost: the full check of a workload over a bare run of the implementation;
3. isolated vs in-process checking, examples per second;
4. exhaustive mode: workloads per second, and the small scope's wall time on all cores;
5. `schedcheck check` on a correct file: each stage's examples and their cost;
6. bug-finding speed: workloads until each catalogued mutant is caught (median and maximum
   over seeds, with seconds);
7. wall time of `pytest -n auto` in the schedcheck-ci profile (CI=true).
Figures are medians of repeated runs; ratios where the machine's speed would blur them.
The last line printed is `ratios: isolated/in-process=X step-cost-100k/1k=Y check/bare=Z`.
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings

from bench import impl_speed
from bench.isolation import SUBMISSION, examples_per_second
from schedcheck import scheduler
from schedcheck.cli.console import Console
from schedcheck.cli.stages import Settings, run_stages
from schedcheck.drive.driver import run
from schedcheck.drive.impl import InProcess
from schedcheck.drive.isolated import Isolated
from schedcheck.drive.loader import load_impl
from schedcheck.drive.standalone import standalone
from schedcheck.model.workload import Workload
from schedcheck.sandbox.process import Limits
from schedcheck.search import profiles
from schedcheck.search.exhaustive import check_exhaustive
from schedcheck.strategies.exhaustive import SCOPES
from schedcheck.strategies.workloads import any_workloads, fixed_sample
from schedcheck.verdict.verify import verify

ROOT = Path(__file__).resolve().parent.parent
ANALYSIS = """
Why the goal of 4x is the wrong goal for this suite: the reference's step is a few list
operations (a few microseconds, section 1), while checking must copy the whole state
out, type-checked, after every call: that copy is the price of never keeping or trusting
an implementation's objects, and it costs more than the step it records. On top, a full
check runs the implementation twice (the trace and its never-preempting twin, for D1) and
the reference once (R1): three runs before any check. So the ratio is about three times
the snapshot overhead, whatever is optimised in the checks. It would meet 4x only for an
implementation whose step costs ten times a snapshot, such as a real engine's. What
matters to users is the absolute rate: section 3 gives examples per second, and a correct
submission is checked by `schedcheck check` in about 7 s (section 5)."""
QUICK = "--quick" in sys.argv


def median_of(repeats: int, action: Callable[[], float]) -> float:
    return statistics.median(action() for _ in range(repeats))


def step_cost(waiting: int, steps: int = 2000) -> float:
    """Seconds per step (schedule + update) of the reference with `waiting` queued."""
    sched = scheduler.Scheduler(
        num_blocks=10**6,
        block_size=16,
        max_num_seqs=8,
        max_num_batched_tokens=64,
        sample_fn=lambda seq: 1,
    )
    for i in range(waiting + 8):
        sched.add(scheduler.Sequence(f"s{i}", 4, 10**6))
    for _ in range(3):  # the running set fills and settles into decoding
        sched.schedule()
        sched.update()
    start = time.perf_counter()
    for _ in range(steps):
        sched.schedule()
        sched.update()
    return (time.perf_counter() - start) / steps


def bare_run(workload: Workload) -> None:
    """The implementation alone: no driver, no snapshots, no checks."""
    c, model, eos = workload.config, workload.model, workload.config.eos_token_id
    sched = scheduler.Scheduler(
        num_blocks=c.num_blocks,
        block_size=c.block_size,
        max_num_seqs=c.max_num_seqs,
        max_num_batched_tokens=c.max_num_batched_tokens,
        eos_token_id=eos,
        sample_fn=lambda seq: model.next_token(seq.seq_id, tuple(seq.output), eos),
    )
    arrivals = workload.arrivals()
    last = workload.last_arrival()
    step = 0
    while True:
        step += 1
        for r in arrivals.get(step, []):
            sched.add(scheduler.Sequence(r.seq_id, r.prompt_len, r.max_tokens))
        sched.schedule()
        sched.update()
        if step >= last and not sched.running and not sched.waiting:
            return


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def first_failure(worker: Isolated, seed_: int) -> tuple[float, float]:
    """(examples generated until the mutant fails, seconds) for one seed."""
    calls, first = [0], []

    @seed(seed_)
    @settings(
        max_examples=5000,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(any_workloads())
    def hunt(workload: Workload) -> None:
        calls[0] += 1
        if not verify(worker, workload).ok:
            first.append(calls[0])
            raise AssertionError("caught")

    start = time.perf_counter()
    with contextlib.suppress(Exception):
        hunt()
    return (first[0] if first else float("inf")), time.perf_counter() - start


def examples_until_caught(path: Path, seeds: int) -> list[tuple[float, float]]:
    """(examples generated until the mutant fails, seconds) for each seed."""
    worker = Isolated(standalone(path), Limits(call_timeout=0.5))
    try:
        return [first_failure(worker, s) for s in range(seeds)]
    finally:
        worker.stop()


def stage_rates(path: Path) -> tuple[list[tuple[str, int, float, float]], float]:
    """For each stage of `schedcheck check PATH`'s session on a correct file, 2 workers:
    (stage, examples, seconds from its first test's start to its last's end, seconds of
    its tests' own time summed over both cores); and the session's wall time."""
    failures = Path(tempfile.mkdtemp())
    settings = Settings(path, profiles.GRADE, "2", 2.0, 1024, False, failures, False)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch, open(os.devnull, "w") as log:
        results = run_stages(settings, Path(scratch), log, Console(io.StringIO()))
    wall = time.perf_counter() - start
    rates = [
        (r.stage.name, r.ticks, r.seconds, sum(o.stop - o.start for o in r.outcomes))
        for r in results
    ]
    return rates, wall


def main() -> None:
    command = "python -m bench.run" + (" --quick" if QUICK else "")
    when = time.strftime("%Y-%m-%d")
    repeats = 3 if QUICK else 5
    blocks: dict[str, tuple[str, list[str]]] = {}
    current = [""]

    def section(key: str, heading: str) -> None:
        """Start the block `key`, under `heading` (where the document lacks it)."""
        current[0] = key
        blocks[key] = (heading, [])
        print(f"\n{heading}", flush=True)

    def say(line: str = "") -> None:
        print(line, flush=True)
        blocks[current[0]][1].append(line)

    section("date", "# Performance")
    say(f"Measured by `{command}` ({os.cpu_count()} cores), {when}.")
    section("1", "## 1. Reference step cost as waiting grows")
    costs = {n: median_of(repeats, lambda n=n: step_cost(n)) for n in (1_000, 10_000, 100_000)}
    for n, cost in costs.items():
        say(f"- {n:>7,} waiting: {cost * 1e6:.1f} us per step ({1 / cost:,.0f} steps/s)")
    step_ratio = costs[100_000] / costs[1_000]
    say(f"- 100k / 1k = {step_ratio:.2f} (goal: at most 2)")

    workloads = fixed_sample(100 if QUICK else 300)
    reference = InProcess(load_impl(SUBMISSION), str(SUBMISSION))
    section("2", "## 2. Checking cost over a bare run")
    bare = median_of(repeats, lambda: timed(lambda: [bare_run(w) for w in workloads]))
    full = median_of(repeats, lambda: timed(lambda: [verify(reference, w) for w in workloads]))
    check_ratio = full / bare
    one_run = median_of(
        repeats, lambda: timed(lambda: [run(reference.module, w) for w in workloads])
    )
    say(
        f"- {len(workloads)} workloads: bare {bare:.3f} s, full check {full:.3f} s (driver, "
        "every check, the reference's lockstep run, the never-preempting twin)"
    )
    say(f"- check / bare = {check_ratio:.1f} (goal: at most 4)")
    say(
        f"- where it goes: one driven run (snapshots after every call) is "
        f"{one_run / bare:.1f}x a bare run, and a full check drives three runs"
    )
    say(ANALYSIS)

    section("3", "## 3. Isolated vs in-process")
    isolated = Isolated(SUBMISSION)
    isolated.start()
    try:
        local = median_of(repeats, lambda: examples_per_second(reference, workloads))
        remote = median_of(repeats, lambda: examples_per_second(isolated, workloads))
    finally:
        isolated.stop()
    iso_ratio = remote / local
    say(
        f"- in-process {local:.0f} examples/s, isolated {remote:.0f} examples/s: "
        f"ratio {iso_ratio:.2f} (goal: at least 0.5)"
    )

    section("4", "## 4. Exhaustive mode")
    jobs = os.cpu_count() or 1
    start = time.perf_counter()
    scan = check_exhaustive(str(SUBMISSION), SCOPES["small"], jobs, Limits())
    wall = time.perf_counter() - start
    say(f"- {SCOPES['small'].describe()}")
    say(
        f"- {scan.states:,} states, {scan.edges:,} transitions in {wall:.1f} s on {jobs} "
        f"cores, isolated: {scan.edges / wall:,.0f} transitions/s (python -m bench.exhaustive "
        "for every scope)"
    )

    section("5", "## 5. `schedcheck check` on a correct file, per stage")
    say("(the stages share one pytest session on 2 workers: their spans overlap; the cost of")
    say("an example is its stage's test time on both cores over its examples)")
    rates, wall = stage_rates(SUBMISSION)
    for stage, count, span, busy in rates:
        each = f", {busy / count * 1000:.1f} ms of a core each" if count else ""
        say(f"- {stage}: {count:,} examples, running {span:.1f} s, {busy:.1f} s of test time{each}")
    walls = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "schedcheck", "check", str(SUBMISSION), "-n", "2"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        walls.append(time.perf_counter() - start)
    say(
        f"- the session: {wall:.1f} s; the whole `schedcheck check`: "
        f"{statistics.median(walls):.1f} s wall (median of 5: "
        f"{', '.join(f'{w:.1f}' for w in walls)})"
    )

    section("5b", "## 5b. `pytest -n auto --impl FILE` against `schedcheck check FILE`")
    say(
        f"(`python -m bench.impl_speed {repeats}`, {when}, {os.cpu_count()} cores, from the "
        "checkout)"
    )
    for line in impl_speed.lines(repeats):
        say(line)

    section("6", "## 6. Bug-finding speed: the random workloads of the properties stage")
    mutants = sorted((ROOT / "tests" / "mutants").glob("*.py"))
    if QUICK:
        mutants = mutants[::4]
    seeds = 1 if QUICK else 5
    say(
        f"Workloads tried until caught and seconds, over {seeds} seeds (up to 5,000 "
        "workloads; inf: not caught by one workload, left to the stateful stage)."
    )
    say("")
    say("| mutant | workloads, median | workloads, max | seconds, median | seconds, max |")
    say("|---|---|---|---|---|")
    found = []
    for path in mutants:
        results = examples_until_caught(path, seeds)
        examples, seconds = [r[0] for r in results], [r[1] for r in results]
        found.append(statistics.median(examples))
        say(
            f"| `{path.stem}` | {statistics.median(examples):.0f} | {max(examples):.0f} | "
            f"{statistics.median(seconds):.1f} | {max(seconds):.1f} |"
        )
    late = sum(f > 300 for f in found)
    say(
        f"\nSuite-wide median: {statistics.median(found):.0f} workloads; {late} of "
        f"{len(found)} mutants need more than 300 (median)."
    )

    section("7", "## 7. The test suite")
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "auto", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env={**os.environ, "CI": "true"},
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    say(
        f"- `pytest -n auto` (schedcheck-ci profile): {wall:.0f} s, exit {done.returncode}: "
        f"{done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ''}"
    )

    last = (
        f"ratios: isolated/in-process={iso_ratio:.2f} step-cost-100k/1k={step_ratio:.2f} "
        f"check/bare={check_ratio:.2f}"
    )
    section("ratios", "")
    say(last)
    if not QUICK:
        path = ROOT / "docs" / "performance.md"
        path.write_text(splice(path.read_text() if path.exists() else "", blocks))


def splice(document: str, blocks: dict[str, tuple[str, list[str]]]) -> str:
    """`document` with each block's text between its markers replaced, and what is
    outside the markers (the notes written by hand, the other benchmarks' tables) kept; a
    block the document lacks goes at its end, under its heading."""
    for key, (heading, lines) in blocks.items():
        begin, end = f"<!-- bench.run {key} -->", f"<!-- /bench.run {key} -->"
        block = "\n".join([begin, "\n".join(lines).strip("\n"), end])
        if begin in document and end in document:
            a, b = document.index(begin), document.index(end) + len(end)
            document = document[:a] + block + document[b:]
        else:
            document = document.rstrip("\n") + "\n\n" + (heading + "\n" if heading else "")
            document += block + "\n"
    return document


if __name__ == "__main__":
    main()
