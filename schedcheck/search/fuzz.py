"""A long fuzz campaign: search until the time is up, report progress, keep counterexamples.

Rounds of Hypothesis searches, each with a fresh random seed, run the implementation in an
isolated worker; a failing workload is shrunk and written to the output folder in the
regression corpus's format (schedcheck/suite/regressions/), and the search goes on. At least every
10 s a line says how many examples ran, how many of the spec's behaviours they exercised,
and how many failures were found.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, find, settings
from hypothesis.errors import NoSuchExample

from schedcheck.drive.isolated import Isolated
from schedcheck.model.regression import Regression
from schedcheck.model.workload import Workload
from schedcheck.sandbox.process import Limits
from schedcheck.strategies.coverage import LABELS, observe
from schedcheck.strategies.workloads import any_workloads
from schedcheck.verdict.verify import verify

PROGRESS_EVERY = 10.0  # seconds
ROUND = 500  # examples per search round


class TimeUp(Exception):
    """The campaign's time is over."""


def campaign(
    path: Path,
    seconds: float,
    out: Path,
    limits: Limits | None = None,
    say: Callable[[str], None] = print,
    seed: int | None = None,
) -> int:
    """Fuzz the submission at `path` for `seconds`; return how many failures were saved.

    Each round draws a fresh seed from one generator (`seed` fixes it, for tests)."""
    out.mkdir(parents=True, exist_ok=True)
    worker = Isolated(path, limits)
    deadline = time.monotonic() + seconds
    examples, labels, saved, checks = 0, set[str](), 0, set[str]()
    last = time.monotonic()

    unshrunk: list[Workload] = []  # the round's first failure, in case time runs out

    def fails(workload: Workload) -> bool:
        nonlocal examples, last
        if time.monotonic() > deadline:
            raise TimeUp
        examples += 1
        labels.update(observe(workload))
        if time.monotonic() - last >= PROGRESS_EVERY:
            last = time.monotonic()
            say(f"{examples} examples, {len(labels)}/{len(LABELS)} behaviours, {saved} failures")
        failed = not verify(worker, workload).ok
        if failed and not unshrunk:
            unshrunk.append(workload)
        return failed

    def keep(workload: Workload, how: str = "") -> None:
        nonlocal saved
        verdict = verify(worker, workload)
        if verdict.ok or verdict.violations[0].check in checks:
            return  # flaky, or that bug is kept already: look for others
        first = verdict.violations[0]
        checks.add(first.check)
        saved += 1
        name = out / f"fuzz-{saved:03d}-{first.check}.json"
        name.write_text(Regression(workload, first.check, f"{first}{how}").to_json() + "\n")
        say(f"failure {saved}: {first}{how} -> {name}")

    rng = random.Random(seed)
    try:
        while time.monotonic() < deadline:
            unshrunk.clear()
            search = settings(
                max_examples=ROUND,
                database=None,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            )
            try:
                keep(find(any_workloads(), fails, settings=search, random=rng))
            except NoSuchExample:
                continue
            except Exception:  # TimeUp, alone or wrapped by Hypothesis mid-shrink
                if time.monotonic() <= deadline:
                    raise
                if unshrunk:
                    keep(unshrunk[0], " (not shrunk: the time ran out)")
                break
    finally:
        worker.stop()
    say(f"done: {examples} examples, {len(labels)}/{len(LABELS)} behaviours, {saved} failures")
    return saved
