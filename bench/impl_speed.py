"""`pytest -n auto --impl FILE` from the checkout against `schedcheck check FILE`, on the same
machine in the same run (issue 37): the verdict on a correct file, and on a buggy one.

Run: python -m bench.impl_speed [REPEATS]
Each command runs REPEATS times (default 3), alternating, from a clean scratch copy of the
file; the figures are medians of wall time, and the last line is the ratio pytest / check
for each file (the goal: at most 1.5 on the correct file, the buggy file's no later).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from schedcheck.drive.standalone import standalone

ROOT = Path(__file__).resolve().parent.parent
CORRECT = ROOT / "tests" / "equivalents" / "one_pass.py"
BUGGY = ROOT / "tests" / "mutants" / "bt_phase2_continue.py"


def wall(command: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, check=False)
    return time.perf_counter() - start, done.returncode


def commands(path: Path) -> dict[str, list[str]]:
    return {
        "check": [sys.executable, "-m", "schedcheck", "check", str(path)],
        "pytest": [sys.executable, "-m", "pytest", "-n", "auto", "-q", "--impl", str(path)],
    }


def measure(path: Path, repeats: int) -> dict[str, tuple[float, set[int]]]:
    times: dict[str, list[float]] = {"check": [], "pytest": []}
    codes: dict[str, set[int]] = {"check": set(), "pytest": set()}
    for _ in range(repeats):
        for name, command in commands(path).items():
            seconds, code = wall(command)
            times[name].append(seconds)
            codes[name].add(code)
    return {name: (statistics.median(times[name]), codes[name]) for name in times}


def lines(repeats: int) -> list[str]:
    """The measurement, as the lines bench.run writes into docs/performance.md."""
    scratch = Path(tempfile.mkdtemp(prefix="schedcheck-bench-"))
    out = []
    try:
        ratios = []
        for label, source in (("correct", CORRECT), ("buggy", standalone(BUGGY))):
            path = scratch / label / "p07_scheduler.py"
            path.parent.mkdir()
            shutil.copy(source, path)
            found = measure(path, repeats)
            (check, check_codes), (pytest, pytest_codes) = found["check"], found["pytest"]
            out.append(
                f"- {label} file ({source.name}): `schedcheck check` {check:.1f} s "
                f"(exit {sorted(check_codes)}), `pytest -n auto --impl` {pytest:.1f} s "
                f"(exit {sorted(pytest_codes)}), median of {repeats}"
            )
            ratios.append(f"{label}={pytest / check:.2f}")
        out.append(f"ratios pytest/check: {' '.join(ratios)}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def main(argv: list[str]) -> None:
    for line in lines(int(argv[0]) if argv else 3):
        print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
