"""Gradescope's `results.json` from one graded submission (grade_one's `Entry`).

One Gradescope test per check group of `grade`'s report.json, in the same order, each worth
a near-equal share of the points (`shares`: they add up to exactly the total the teacher
set): partial credit by group. A failing group's output is its
shrunk counterexample and how to replay it. Schema: Gradescope's autograder
specification (`score`, `execution_time`, `output`, `tests`: `name`, `number`, `score`,
`max_score`, `status`, `output`, `visibility`). A grading that ended in our own error
writes no file: Gradescope then says the autograder failed, which is the truth, instead
of a score the student did not earn or lose.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from schedcheck.grading.grade import GROUPS
from schedcheck.grading.report import Entry, GroupState, Verdict
from schedcheck.invariants.violation import CATALOGUE

VISIBILITY = ("visible", "hidden", "after_due_date", "after_published")


def title(group: str) -> str:
    checks = GROUPS[group]
    if not checks:
        return "examples: the spec's worked examples, step for step"
    return f"{group}: {CATALOGUE[checks[0]].title}"


def results(
    entry: Entry, seconds: float, points: float = 100.0, visibility: str = "visible"
) -> dict[str, Any]:
    """The results.json of `entry` (verdict pass or fail; never error)."""
    if entry.verdict not in (Verdict.PASS, Verdict.FAIL):
        raise ValueError(f"verdict {entry.verdict.value!r}: no score to give")
    tests: list[dict[str, Any]] = []
    for number, (group, share) in enumerate(
        zip(GROUPS, shares(points, len(GROUPS)), strict=True), 1
    ):
        state = entry.checks.get(group, GroupState.NOT_RUN)
        tests.append(
            {
                "name": title(group),
                "number": str(number),
                "score": share if state is GroupState.PASS else 0.0,
                "max_score": share,
                "status": "passed" if state is GroupState.PASS else "failed",
                "output": _output(entry, group, state),
                "visibility": visibility,
            }
        )
    score = float(sum(Fraction(t["score"]) for t in tests))  # exact: see shares()
    passed = sum(t["status"] == "passed" for t in tests)
    return {
        "score": score,
        "execution_time": round(seconds),
        "output": f"schedcheck: {passed} of {len(tests)} check groups pass "
        f"(isolation: {'unknown' if entry.isolation is None else entry.isolation}).",
        "visibility": visibility,
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def shares(points: float, n: int) -> list[float]:
    """`points` in `n` near-equal shares whose sum is exactly `points`, in whatever order
    Gradescope adds them (6.6667 fifteen times made 100.0005): every share a whole number
    of one binary fraction, 1/2**k, fine enough that shares differ by under 2% (100 points
    in 15 groups: ten of 6.6875 and five of 6.625)."""
    unit = Fraction(1, Fraction(points).denominator)  # a float is a/2**k, exactly
    while points / unit < 64 * n:
        unit /= 2
    base, extra = divmod(int(points / unit), n)
    return [float((base + (i < extra)) * unit) for i in range(n)]


def _output(entry: Entry, group: str, state: GroupState) -> str:
    if state is GroupState.PASS:
        return "passes on the spec's examples and the whole sample"
    if state is GroupState.NOT_RUN:
        return "not run: the submission could not be driven far enough to judge this"
    checks = GROUPS[group] or tuple(CATALOGUE)
    found = next((f for f in entry.failures if f.check in (*checks, group)), None)
    if found is None:
        return "fails (see the other groups' counterexamples)"
    text = found.message
    if found.workload is not None:
        # The file `--replay` reads, its workload as report.json has it (to_json's order).
        workload = found.to_dict()["workload"]
        saved = {"check": found.check, "note": found.message, "workload": workload}
        text += (
            "\n\nthe smallest workload found; save it as failing.json and run\n"
            "  schedcheck check p07_scheduler.py --replay failing.json\n\n"
            + json.dumps(saved, indent=1)
        )
    return text
