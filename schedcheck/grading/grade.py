"""Grade submissions: per check group, pass or fail, with a shrunk counterexample each.

One submission: the contract check; the spec's worked examples; then one fixed,
derandomized sample of workloads run with every check, which says which groups fail; for
each failing group, a search shrinks a workload that breaks that group. Everything a
verdict depends on is derandomized and free of timing (but a hang, which is a failure
whatever the machine), so grading the same files twice gives the same report.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from hypothesis import find
from hypothesis.errors import NoSuchExample

from schedcheck.drive.isolated import Isolated
from schedcheck.faults import CheckerError, SubmissionError
from schedcheck.grading.report import Entry, Failure, GroupState, Verdict
from schedcheck.invariants import catalogue
from schedcheck.invariants.violation import Violation
from schedcheck.model.workload import Workload
from schedcheck.sandbox.process import Limits
from schedcheck.search.hunt import SEARCH
from schedcheck.strategies.examples import EXAMPLES
from schedcheck.strategies.large import big, long
from schedcheck.strategies.workloads import any_workloads, fixed_sample
from schedcheck.verdict.html import page
from schedcheck.verdict.verify import verify

# The grading groups in report order: the contract (C1), then the spec's worked examples
# (every check at once: a group with no check of its own), then the other checks' groups,
# all as the catalogue has them (invariants/catalogue.py). Unpacking the catalogue's groups
# sets "contract" again, to the same checks, and a dict keeps a key where it was first set.
GROUPS: dict[str, tuple[str, ...]] = {
    "contract": catalogue.GROUPS["contract"],
    "examples": (),
    **catalogue.GROUPS,
}
GROUP_OF = catalogue.GROUP_OF
SAMPLE_SIZE = 200
LARGER = 3  # of each shape of larger workload (strategies/large.py): a bug of size


@functools.cache
def larger_sample() -> list[Workload]:
    """The largest LARGER of a fixed draw of each shape (a derandomized draw begins with
    the smallest): the same on every machine."""
    return [
        workload
        for shape in (big(), long())
        for workload in sorted(set(fixed_sample(12 * LARGER, shape)), key=_order)[-LARGER:]
    ]


class OverBudget(Exception):
    """Grading this submission took longer than its time budget."""


def _order(workload: Workload) -> tuple[tuple[int, int, int], str]:
    return workload.size(), workload.to_json(indent=None)  # a total order: the same sample


def note(message: str) -> Failure:
    """A failure with no workload: the grader's own trouble, or its budget."""
    return Failure("", message)


def failure(violation: Violation, workload: Workload, steps: int) -> Failure:
    return Failure(violation.check, str(violation), workload, steps)


def grade_one(path: str, limits: Limits, budget: float, size: int = SAMPLE_SIZE) -> Entry:
    """The report entry of one submission (see docs/grading.md)."""
    checks = dict.fromkeys(GROUPS, GroupState.NOT_RUN)
    failures: list[Failure] = []
    isolation: str | None = None  # None until the worker says: no key in report.json
    worker = Isolated(path, limits)

    def spent() -> bool:  # what the submission used, never the machine's load (Sandbox.used)
        return worker.used() > budget

    def entry(verdict: Verdict, found: list[Failure], page_html: str | None = None) -> Entry:
        """The entry as grading stands now (a copy: `checks` is still being filled)."""
        return Entry(path, verdict, dict(checks), tuple(found), isolation, page_html=page_html)

    try:
        worker.start()
    except SubmissionError as e:
        isolation = worker.isolation or "unknown"
        checks["contract"] = GroupState.FAIL
        return entry(Verdict.FAIL, [Failure("C1", str(e))])
    except CheckerError as e:  # ours, as `schedcheck check`'s exit 3 (schedcheck/faults.py)
        return entry(Verdict.ERROR, [note(str(e))])
    isolation = worker.isolation  # the level in effect (docs/isolation.md)
    failing: dict[str, Workload] = {}
    page_html: str | None = None
    # Small workloads known to break something, tried first when a group is shrunk: the
    # spec's worked example that failed, then those shrunk for earlier groups.
    shrunk: list[Workload] = []
    try:
        checks["examples"] = GroupState.PASS
        for workload in EXAMPLES.values():
            verdict = verify(worker, workload)
            if verdict.ok:
                continue
            checks["examples"] = GroupState.FAIL
            failures.append(failure(verdict.violations[0], workload, len(verdict.trace.steps)))
            shrunk.append(workload)
            if verdict.violations[0].check == "C1":
                # It cannot even run the spec's examples: nothing else can be judged.
                checks["contract"] = GroupState.FAIL
                return entry(Verdict.FAIL, failures, page(worker, workload))
            break
        completed = 0
        for workload in fixed_sample(size) + larger_sample():
            if spent():
                raise OverBudget
            violations = verify(worker, workload).violations
            completed += all(v.check != "C1" for v in violations)
            for v in violations:
                failing.setdefault(GROUP_OF[v.check], workload)
        # A group only passes on evidence: most of the sample must have run to the end.
        unfailed = GroupState.PASS if completed * 2 >= size + 2 * LARGER else GroupState.NOT_RUN
        for group in GROUPS:
            if group != "examples":
                checks[group] = GroupState.FAIL if group in failing else unfailed
        for group in sorted(failing, key=list(GROUPS).index):
            failures.append(shrink(worker, group, spent, shrunk, failing[group]))
        drawn = next((f.workload for f in failures if f.workload is not None), None)
        if drawn is not None:
            page_html = page(worker, drawn)
    except CheckerError as e:
        return entry(Verdict.ERROR, [note(str(e))])
    except OverBudget:
        if not failing and checks["examples"] is not GroupState.FAIL:  # no evidence: ours
            return entry(
                Verdict.ERROR,
                [*failures, note(f"grading took over {budget:g} s of the submission's time")],
            )
        # What failed did fail (a submission that hangs spends the budget on its hangs):
        # a verdict on that evidence, and what was not reached is not judged.
        for group in failing:
            checks[group] = GroupState.FAIL
        stopped = note(
            f"grading stopped at its budget of {budget:g} s of the submission's time (CPU "
            "and hung calls); groups marked 'not run' were not judged"
        )
        return entry(Verdict.FAIL, [*failures, stopped])
    finally:
        worker.stop()
    failed = any(state is GroupState.FAIL for state in checks.values())
    return entry(Verdict.FAIL if failed else Verdict.PASS, failures, page_html)


def shrink(
    worker: Isolated,
    group: str,
    spent: Callable[[], bool],
    shrunk: list[Workload],
    sampled: Workload,
) -> Failure:
    """The smallest workload the search finds that breaks `group`, and what broke; where
    the search finds none (a bug only larger workloads show), the `sampled` one that did.

    One bug often breaks several groups: a small workload already known to break something
    (the spec's worked example that failed, one shrunk for an earlier group) that breaks
    this one too is reported again instead of a new search. `shrunk` collects them."""

    checks = GROUPS[group]  # only these: no twin run unless D1, no reference unless R1

    def breaks(workload: Workload) -> bool:
        if spent():
            raise OverBudget
        return not verify(worker, workload, checks).ok

    workload = next((w for w in shrunk if breaks(w)), None)
    if workload is None and sampled in larger_sample():
        workload = sampled  # no ordinary workload of the sample broke it: no search will
    if workload is None:
        try:
            workload = find(any_workloads(), breaks, settings=SEARCH)
            shrunk.append(workload)
        except NoSuchExample:  # the sample found one the search does not reach: keep that
            workload = sampled
    verdict = verify(worker, workload, checks)
    violation = verdict.violations[0]
    return failure(violation, workload, len(verdict.trace.steps))


def grade_many(
    paths: list[str], jobs: int, limits: Limits, budget: float, size: int = SAMPLE_SIZE
) -> list[Entry]:
    """Grade `paths` `jobs` at a time, each in processes of its own; report in path order."""
    context = get_context("spawn")  # a fresh interpreter per grader: nothing is shared
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {p: pool.submit(grade_one, p, limits, budget, size) for p in paths}
        results = []
        for path, future in futures.items():
            try:
                results.append(future.result())
            except Exception as e:  # the grader itself broke on this one: no group judged
                results.append(Entry(path, Verdict.ERROR, {}, (note(repr(e)),)))
    return results


def discover(targets: list[str]) -> list[str]:
    """Submission files: each *.py given, each *.py in a directory given, and each
    p07_scheduler.py one folder down (one folder per student)."""
    found: set[Path] = set()
    for target in map(Path, targets):
        if target.is_file():
            found.add(target.resolve())
        elif target.is_dir():
            found.update(p.resolve() for p in target.glob("*.py"))
            found.update(p.resolve() for p in target.glob("*/p07_scheduler.py"))
        else:
            raise FileNotFoundError(f"no submission file or folder at {target}")
    return sorted(map(str, found))


def shard(paths: list[str], spec: str) -> list[str]:
    """The K-th of N deterministic shares ("K/N", K from 1) of the sorted paths."""
    k, n = (int(x) for x in spec.split("/"))
    if not 1 <= k <= n:
        raise ValueError(f"--shard must be K/N with 1 <= K <= N, got {spec}")
    return [p for i, p in enumerate(sorted(paths)) if i % n == k - 1]
