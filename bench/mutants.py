"""The mutant catalogue, checked the way `schedcheck check` checks a submission.

Run: python -m bench.mutants [NAME ...]
For each mutant in tests/mutants/ (or those named), `harness.hunt` searches for a failing
workload with the mutant in an isolated worker and shrinks it; the row says which check
fired first and how small the counterexample is. Prints the table of docs/mutants.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.hunt import hunt

MUTANTS = Path(__file__).resolve().parent.parent / "tests" / "mutants"


def main(names: list[str]) -> None:
    mutants = names or sorted(p.stem for p in MUTANTS.glob("*.py"))
    print("| mutant | bug | first check | requests | steps |")
    print("|---|---|---|---|---|")
    small = 0
    for mutant in mutants:
        path = MUTANTS / f"{mutant}.py"
        caught = hunt(path)
        bug = path.read_text().split('"""')[1].splitlines()[0].removeprefix("Bug: ")
        small += caught.requests <= 3 and caught.steps <= 8
        print(f"| `{mutant}` | {bug} | {caught.check} | {caught.requests} | {caught.steps} |")
    print(f"\n{small} of {len(mutants)} shrink to <= 3 requests and <= 8 steps")


if __name__ == "__main__":
    main(sys.argv[1:])
