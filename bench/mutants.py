"""The mutant catalogue, checked the way `schedcheck check` checks a submission.

Run: python -m bench.mutants [--corpus DIR] [NAME ...]
For each mutant in tests/mutants/ (or those named), `schedcheck.search.hunt` searches for a failing
workload with the mutant in an isolated worker and shrinks it; the row says which check
fired first and how small the counterexample is. Prints the table of docs/mutants.md.
With --corpus, also writes each shrunk workload there as a regression
(schedcheck/suite/regressions/).
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import strategies as st

from schedcheck.drive.standalone import found_by_the_larger_stage, standalone
from schedcheck.model.regression import Regression
from schedcheck.search.hunt import hunt
from schedcheck.strategies.large import big, long

MUTANTS = Path(__file__).resolve().parent.parent / "tests" / "mutants"


def main(argv: list[str]) -> None:
    corpus = Path(argv[argv.index("--corpus") + 1]) if "--corpus" in argv else None
    names = [a for a in argv if not a.startswith("--") and Path(a) != corpus]
    mutants = names or sorted(p.stem for p in MUTANTS.glob("*.py"))
    print("| mutant | bug | first check | requests | steps |")
    print("|---|---|---|---|---|")
    small = 0
    for mutant in mutants:
        path = MUTANTS / f"{mutant}.py"
        # A bug of size is hunted among the larger stage's workloads (and shrinks slowly).
        larger = st.one_of(big(), long()) if found_by_the_larger_stage(path) else None
        caught = hunt(standalone(path), workloads=larger)
        bug = path.read_text().split('"""')[1].splitlines()[0].removeprefix("Bug: ")
        small += caught.requests <= 3 and caught.steps <= 8
        print(f"| `{mutant}` | {bug} | {caught.check} | {caught.requests} | {caught.steps} |")
        if corpus is not None:
            note = f"caught tests/mutants/{mutant}.py: {bug} {caught.verdict.violations[0]}"
            regression = Regression(caught.workload, caught.check, note)
            (corpus / f"{mutant}.json").write_text(regression.to_json() + "\n")
    print(f"\n{small} of {len(mutants)} shrink to <= 3 requests and <= 8 steps")


if __name__ == "__main__":
    main(sys.argv[1:])
