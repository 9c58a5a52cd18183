"""How fast a hang is told (issue 54): the catalogue's hanging mutants through `schedcheck
check`, `pytest --impl` and `schedcheck grade`, from start to verdict, at the default call
timeout (2 s).

Run: python -m bench.hangs
Prints, per mutant, the seconds each took (the goal: 20 s on two cores), check's
counterexample (requests and steps of the trace it shows) and the line it names.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from schedcheck.drive.standalone import standalone

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "tests" / "mutants"
HANGING = (
    "infinite_loop_full_house",
    "hang_phase1_retry_never_preempts",
    "hang_phase2_admits_without_progress",
    "hang_update_frees_block_by_block",
)


def timed(command: list[str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=900)
    return time.perf_counter() - start, done.stdout + done.stderr


def main() -> None:
    schedcheck = [sys.executable, "-m", "schedcheck"]
    print("| mutant | check | pytest --impl | grade | shown | line named |")
    print("|---|---|---|---|---|---|")
    for name in HANGING:
        with tempfile.TemporaryDirectory() as folder:
            here = Path(folder)
            path = standalone(MUTANTS / f"{name}.py", here / "class")
            check_s, out = timed([*schedcheck, "check", str(path)], here)
            pytest_s, _ = timed(
                [sys.executable, "-m", "pytest", "-n", "2", "-q", "-p", "no:cacheprovider",
                 f"--impl={path}", str(ROOT / "schedcheck" / "suite")],
                ROOT,
            )  # fmt: skip
            grade_s, _ = timed([*schedcheck, "grade", str(path), "--out", "graded"], here)
        rows = re.findall(r"^\| (\d+) \| ", out, re.M)
        requests = (
            len(re.findall(r"^\| step \| call \| returned \|(.*)$", out, re.M)[0].split("|")) - 4
        )
        where = re.search(r"executing line \d+ of [\w.]+, in (\w+)", out)
        print(
            f"| `{name}` | {check_s:.1f} s | {pytest_s:.1f} s | {grade_s:.1f} s "
            f"| {requests} requests, {len(set(rows))} steps | {where[1] if where else '-'} |"
        )


if __name__ == "__main__":
    main()
