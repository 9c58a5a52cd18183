"""The check's stages after the contract, in one pytest session of the suite in a process of
its own: its output into the log, its outcomes read from what the plugin wrote
(schedcheck/plugin.py's OutcomeLog), never from pytest's text.

First the spec's worked examples (fixed workloads, no shrinking; the first failure stops
the stage: a submission that hangs or crashes on anything is reported in seconds), then
the random search, and the stateful test (its counterexamples take longest to shrink). One
session, not one per stage: pytest starts once, and both cores stay busy to the end; the
order is kept by schedcheck/suite/holds.py's rule that a later stage gives way as soon as an earlier
one finds a failure. pytest runs with only the plugins it needs (xdist, Hypothesis, ours):
a plugin of the student's environment (one that reorders, reruns or times tests) must not
change the verdict.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from schedcheck import layout
from schedcheck.cli.console import Console
from schedcheck.plugin import CALL_TIMEOUT, CHECKED, IN_PROCESS, MEMORY_MB, OUTCOMES
from schedcheck.search import profiles
from schedcheck.suite.holds import FOUND, ORDER, PROGRESS, STAGE_FILES

INI = "[pytest]\naddopts = --strict-markers\nxfail_strict = true\n"


@dataclass(frozen=True)
class Stage:
    """One line of check's output; the stages' order is suite.holds.STAGE_FILES'."""

    name: str
    file: str  # in schedcheck/suite/
    tests: str  # what its tests are called in its line ("" for none)
    ticks: str  # what one tick of suite.holds.tick() is ("" for none)


STAGES = (
    Stage("worked examples", "test_seed_examples.py", "tests", ""),
    Stage("properties", "test_properties.py", "properties", "random workloads"),
    Stage("stateful", "test_state_machine.py", "", "stateful runs"),
    Stage("larger", "test_large.py", "", "larger workloads"),
)


@dataclass(frozen=True)
class Outcome:
    """One test's result, as the plugin logged it."""

    test: str
    outcome: str  # passed, failed, skipped
    checks: list[str] | None  # the checks that fired; None: the failure is ours
    report: str | None  # schedcheck's own report of the most informative failure
    rank: tuple[int, ...]
    start: float = 0.0  # the epoch seconds the test's phase began and ended
    stop: float = 0.0
    why: str = ""  # a skip's reason
    file: str = ""  # the suite's file it is in: its stage

    @property
    def name(self) -> str:
        return self.test.rsplit("::", 1)[-1]

    @classmethod
    def from_dict(cls, line: dict[str, Any]) -> Outcome:
        rank = tuple(line.get("rank") or (1 << 30,))
        checks, report = line.get("checks"), line.get("report")
        times = float(line.get("start") or 0.0), float(line.get("stop") or 0.0)
        where = line.get("file") or ""
        return cls(
            line["test"],
            line["outcome"],
            checks,
            report,
            rank,
            *times,
            line.get("why") or "",
            where,
        )


@dataclass
class Result:
    """One stage's part of the session."""

    stage: Stage
    code: int  # pytest's exit status, for the whole session
    seconds: float  # from its first test's start to its last test's end
    ticks: int
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def ran(self) -> bool:
        """Whether any of its tests ran (rather than gave way to an earlier stage's failure)."""
        return any(o.outcome != "skipped" for o in self.outcomes)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.outcome == "failed"]

    @property
    def ours(self) -> list[Outcome]:
        """Failures that are schedcheck's fault: never a verdict."""
        return [o for o in self.failed if o.checks is None]

    @property
    def is_verdict(self) -> bool:
        """A clean FAIL: pytest said 1, and every failure it logged is a check's."""
        return self.code == 1 and bool(self.failed) and not self.ours

    @property
    def word(self) -> str:
        """Its word on its line: ok, FAIL (a verdict), ERROR (ours), skipped."""
        if self.failed:
            return "FAIL" if self.is_verdict else "ERROR"
        if self.outcomes and not self.ran:
            return "skipped"
        return "ok" if self.code in (0, 1) else "ERROR"

    def summary(self) -> str:
        """`3 properties, 984 random workloads, 5.6 s`; `1 of 3 failed, ...` on failure."""
        tests = len({o.test for o in self.outcomes if o.outcome != "skipped"})
        parts = [f"{len(self.failed)} of {tests} failed"] if self.failed else []
        if self.stage.tests and not self.failed:
            parts.append(f"{tests} {self.stage.tests}")
        if self.stage.ticks:
            parts.append(f"{self.ticks:,} {self.stage.ticks}")
        return ", ".join([*parts, f"{self.seconds:.1f} s"])


@dataclass(frozen=True)
class Settings:
    path: Path  # the submission
    profile: str  # a Hypothesis profile: `grade` stands for ours, `schedcheck-grade`
    workers: str
    call_timeout: float
    memory_mb: int
    in_process: bool
    failures: Path  # where shrunk counterexamples go
    verbose: bool


def pytest_command(settings: Settings, scratch: Path) -> list[str]:
    """The one pytest run of every stage's tests, in `scratch` (its pytest.ini, its rootdir):
    only the plugins it needs, and the plugin's options under their prefixed names."""
    return [
        sys.executable,
        "-m",
        "pytest",
        "-n",
        settings.workers,
        "-q",
        "--no-header",
        "-p",
        "no:cacheprovider",
        "-p",
        "xdist.plugin",
        "-p",
        "_hypothesis_pytestplugin",
        "-p",
        "schedcheck.plugin",
        "-c",
        str(scratch / "pytest.ini"),
        f"--rootdir={scratch}",
        "--tb=short",
        f"--hypothesis-profile={profiles.prefixed(settings.profile)}",
        "--impl",
        str(settings.path.resolve()),
        f"{CALL_TIMEOUT}={settings.call_timeout}",
        f"{MEMORY_MB}={settings.memory_mb}",
        *([IN_PROCESS] if settings.in_process else []),
        *(str(layout.SUITE / stage.file) for stage in STAGES),
    ]


def run_stages(settings: Settings, scratch: Path, log: IO[str], console: Console) -> list[Result]:
    """Run every stage's tests in one session; the live line says how far each got."""
    outcomes, ticks, found = scratch / "outcomes.jsonl", scratch / "progress", scratch / "found"
    ticks.mkdir()
    (scratch / "pytest.ini").write_text(INI)
    command = pytest_command(settings, scratch)
    env = {
        **os.environ,
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # only the plugins pytest_command names
        "SCHEDCHECK_SAVE_FAILURES": str(settings.failures.resolve()),
        OUTCOMES: str(outcomes),
        CHECKED: str(settings.path.resolve()),
        PROGRESS: str(ticks),
        FOUND: str(found),
        ORDER: " ".join(STAGE_FILES),
    }
    log.write(f"\n$ {' '.join(command)}\n")
    log.flush()
    start = time.monotonic()
    proc = subprocess.Popen(
        command, cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    copier = threading.Thread(target=_copy, args=(proc.stdout, log, settings.verbose))
    copier.start()
    while proc.poll() is None:
        if not settings.verbose:
            failed = sum(o.outcome == "failed" for o in _read(outcomes))
            counts = [
                f"{_size(ticks / stage.file):,} {stage.ticks}" for stage in STAGES if stage.ticks
            ]
            console.progress(
                f"{', '.join(counts)}, {failed} failed so far, {time.monotonic() - start:.0f} s"
            )
        time.sleep(0.2)
    copier.join()
    console.clear()
    read = _read(outcomes)
    results = []
    for stage in STAGES:
        mine = [o for o in read if o.file == stage.file]
        ran = [o for o in mine if o.start]
        seconds = max((o.stop for o in ran), default=0.0) - min((o.start for o in ran), default=0.0)
        results.append(Result(stage, proc.returncode, seconds, _size(ticks / stage.file), mine))
    return results


def _copy(pipe: IO[bytes], log: IO[str], echo: bool) -> None:
    """pytest's output into the log, and to our own output too with -v."""
    for raw in pipe:
        text = raw.decode(errors="replace")
        log.write(text)
        if echo:
            sys.stdout.write(text)
            sys.stdout.flush()
    log.flush()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read(path: Path) -> list[Outcome]:
    if not path.exists():
        return []
    # The last line may be half written while pytest runs: read only whole ones.
    lines = path.read_text().split("\n")[:-1]
    return [Outcome.from_dict(json.loads(line)) for line in lines if line.strip()]
