"""Run the whole suite again and again, some runs with every core busy, to find flaky tests.

Run: python -m bench.repeat_suite RUNS [--busy-every K] [--out FILE.jsonl]
Every K-th run (default 4) starts one busy-looping process per core for its whole length.
Each run adds a line to FILE (default repeat-suite.jsonl): run number, busy or not, exit
status, seconds, and the ids of the tests that failed, with the first lines of the summary.
A flaky test is one that fails in some runs and not others: read its failure, fix its
cause; never retry it or widen its timeout without a reason written next to it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one_run(busy: bool) -> dict[str, object]:
    hogs = []
    if busy:
        hogs = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(os.cpu_count() or 1)
        ]
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-n", "auto", "-q", "-p", "no:cacheprovider"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "CI": "true"},
        )
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", done.stdout, re.M)
    return {
        "busy": busy,
        "rc": done.returncode,
        "seconds": round(time.monotonic() - start, 1),
        "failed": failed,
        "summary": done.stdout.strip().splitlines()[-1:],
        "output": done.stdout[-20000:] if failed or done.returncode else "",
    }


def main(argv: list[str]) -> None:
    runs = int(argv[0])
    every = int(argv[argv.index("--busy-every") + 1]) if "--busy-every" in argv else 4
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else Path("repeat-suite.jsonl")
    for number in range(1, runs + 1):
        result = {"run": number, **one_run(busy=every > 0 and number % every == 0)}
        with out.open("a") as f:
            f.write(json.dumps(result) + "\n")
        print(
            f"run {number}: rc {result['rc']}, {result['seconds']} s, busy {result['busy']}, "
            f"failed {result['failed']}",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
