"""The check's stages after the contract: one pytest run of the suite per stage, in a
process of its own, its output into the log, its outcomes read from what the plugin wrote
(schedcheck/plugin.py's OutcomeLog), never from pytest's text.

First the spec's worked examples (fixed workloads, no shrinking: a submission that hangs
or crashes on anything is reported in seconds), then the random search, and only when it
found nothing the stateful test (its counterexamples take longest to shrink).
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

from harness import layout
from schedcheck.console import Console
from schedcheck.plugin import OUTCOMES
from suite.holds import PROGRESS

INI = "[pytest]\naddopts = --strict-markers\nxfail_strict = true\n"


@dataclass(frozen=True)
class Stage:
    name: str
    file: str  # in suite/
    tests: str  # what its tests are called in its line ("" for none)
    ticks: str  # what one tick of suite.holds.tick() is ("" for none)
    serial: bool = False  # stop at the first failure, no xdist


STAGES = (
    Stage("worked examples", "test_seed_examples.py", "tests", "", serial=True),
    Stage("properties", "test_properties.py", "properties", "random workloads"),
    Stage("stateful", "test_state_machine.py", "", "stateful runs"),
)


@dataclass(frozen=True)
class Outcome:
    """One test's result, as the plugin logged it."""

    test: str
    outcome: str  # passed, failed, skipped
    checks: list[str] | None  # the checks that fired; None: the failure is ours
    report: str | None  # schedcheck's own report of the most informative failure
    rank: tuple[int, ...]

    @property
    def name(self) -> str:
        return self.test.rsplit("::", 1)[-1]

    @classmethod
    def from_dict(cls, line: dict[str, Any]) -> Outcome:
        rank = tuple(line.get("rank") or (1 << 30,))
        return cls(line["test"], line["outcome"], line.get("checks"), line.get("report"), rank)


@dataclass
class Result:
    stage: Stage
    code: int  # pytest's exit status
    seconds: float
    ticks: int
    outcomes: list[Outcome] = field(default_factory=list)

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
    profile: str
    workers: str
    call_timeout: float
    memory_mb: int
    in_process: bool
    failures: Path  # where shrunk counterexamples go
    verbose: bool


def run_stage(
    stage: Stage, settings: Settings, scratch: Path, log: IO[str], console: Console
) -> Result:
    """Run one stage's tests; the live line says how far it got while it runs."""
    outcomes, ticks = scratch / f"{stage.file}.jsonl", scratch / f"{stage.file}.progress"
    (scratch / "pytest.ini").write_text(INI)
    workers = ["-n", "0", "-x"] if stage.serial else ["-n", settings.workers]
    command = [
        sys.executable, "-m", "pytest", *workers, "-q", "--no-header", "-p", "no:cacheprovider",
        "-p", "schedcheck.plugin", "-c", str(scratch / "pytest.ini"), f"--rootdir={scratch}",
        "--tb=short", f"--hypothesis-profile={settings.profile}",
        "--impl", str(settings.path.resolve()), f"--call-timeout={settings.call_timeout}",
        f"--memory-mb={settings.memory_mb}", *(["--in-process"] if settings.in_process else []),
        str(layout.SUITE / stage.file),
    ]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(layout.IMPORT_ROOT), os.environ.get("PYTHONPATH", "")]),
        "SCHEDCHECK_SAVE_FAILURES": str(settings.failures.resolve()),
        OUTCOMES: str(outcomes),
        PROGRESS: str(ticks),
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
            done, failed = _size(ticks), sum(o.outcome == "failed" for o in _read(outcomes))
            console.progress(
                f"{stage.name}: {done:,} {stage.ticks or 'examples'}, {failed} failed so far, "
                f"{time.monotonic() - start:.0f} s"
            )
        time.sleep(0.2)
    copier.join()
    console.clear()
    return Result(stage, proc.returncode, time.monotonic() - start, _size(ticks), _read(outcomes))


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
