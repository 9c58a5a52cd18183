"""Grade submissions: per check group, pass or fail, with a shrunk counterexample each.

One submission: the contract check; then every run `schedcheck check`'s stages make, in
their order (schedcheck/suite/tried.py: the spec's worked examples, the properties'
workloads, the stateful runs, the larger workloads), each with its test's checks, which
says which groups fail; for each failing group, the test that found it searches again on
the submission, narrowed to that group's checks, and shrinks what it finds. Whatever
check fails, grade fails, on the same runs (issue 56). Everything a verdict depends on is
derandomized and free of timing (but a hang, which is a failure whatever the machine),
so grading the same files twice gives the same report.
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from hypothesis.errors import Flaky

from schedcheck.drive import driver
from schedcheck.drive.isolated import Isolated
from schedcheck.drive.loader import load_impl
from schedcheck.faults import CheckerError, CheckFailed, SubmissionError
from schedcheck.grading.report import Entry, Failure, GroupState, Sample, Verdict
from schedcheck.invariants import catalogue
from schedcheck.invariants.violation import Violation
from schedcheck.model.trace import Trace
from schedcheck.model.workload import Script, Workload
from schedcheck.sandbox.process import Limits
from schedcheck.search.profiles import GRADE_EXAMPLES
from schedcheck.suite.holds import Narrowed, ShrinkBudget, hung, narrowed
from schedcheck.suite.tried import Run, searches, tried
from schedcheck.verdict.html import page
from schedcheck.verdict.verify import Verdict as Checked
from schedcheck.verdict.verify import verify, verify_pair

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
SAMPLE_SIZE = GRADE_EXAMPLES  # examples a property, as check's profile has them
EXAMPLES_STAGE = "test_seed_examples.py"
UNSEARCHED = (EXAMPLES_STAGE, "test_large.py")  # their failing run is reported as it is
# Runs that hang before grade tries no more of them (issue 54): the hang has failed the
# contract already, and each further one costs a wait; the groups left are not judged.
HUNG_RUNS = 5
# How long a group's failure is shrunk once its search found it: a class's time goes to
# its failing submissions' shrinking, a group each; what is left after it is smallest
# found so far (check shrinks without bound: its counterexample may be smaller).
SHRINKING = 5.0


class OverBudget(BaseException):
    """Grading this submission took longer than its time budget. Not an Exception: raised
    inside a Hypothesis test (a narrowed search), it must end the search, not be taken for
    the failure the search looks for (Hypothesis lets a BaseException through, as it does
    pytest's skip)."""


def note(message: str) -> Failure:
    """A failure with no workload: the grader's own trouble, or its budget."""
    return Failure("", message)


# What grade runs: a driver run of a workload, a stateful run of its script, or two
# schedulers alive at once (the workload's built first, then the other's).
Case = tuple[Workload, Script | None, Workload | None]


def case(run: Run) -> Case:
    return run.workload, run.script, run.other


def failure(violation: Violation, of: Case, steps: int, said: str = "", then: str = "") -> Failure:
    """A check's failure on a case; `said` before its message (which scheduler of two),
    `then` after it."""
    workload, script, other = of
    message = said + str(violation) + then
    return Failure(violation.check, message, workload, steps, script, other)


def check_case(
    worker: Isolated, of: Case, checks: tuple[str, ...], expected: Trace | None = None
) -> tuple[Checked, str]:
    """The verdict on a case, and what its failure's message begins with: for two
    schedulers, the verdict of the one that broke, and which it was. `expected`: the
    reference's trace of the workload, where R1 needs it (for two schedulers, each one's
    is its workload's run alone: `reference_trace`)."""
    workload, script, other = of
    if other is None:
        return verify(worker, workload, checks, script=script, expected=expected), ""
    pair = None if expected is None else (expected, reference_trace(other))
    first, second = verify_pair(worker, workload, other, checks, expected=pair)
    if first.ok and not second.ok:
        return second, "scheduler B of two alive at once (built after A): "
    return first, "" if first.ok else "scheduler A of two alive at once (built first): "


@functools.cache
def reference_trace(workload: Workload) -> Trace:
    """The reference's trace of `workload`: the same for every submission of a class, so
    run once per grader process (a pool's process grades many)."""
    return driver.run(load_impl(), workload)


def _key(run: Run) -> object:
    script = None if run.script is None else tuple(map(tuple, run.script))
    return run.workload, script, run.other


def grade_one(
    path: str,
    limits: Limits,
    budget: float,
    size: int = SAMPLE_SIZE,
    runs: tuple[Run, ...] | None = None,
) -> Entry:
    """The report entry of one submission (see docs/grading.md): check's runs at `size`
    examples a property (`runs`, where the caller collected them already)."""
    checks = dict.fromkeys(GROUPS, GroupState.NOT_RUN)
    failures: list[Failure] = []
    isolation: str | None = None  # None until the worker says: no key in report.json
    worker = Isolated(path, limits)
    # What each distinct run needs: a workload several tests draw runs once, with the
    # union of their checks, and counts once toward the evidence.
    wanted: dict[object, tuple[str, ...]] = {}
    judged: dict[object, tuple[Checked, str]] = {}
    reached: Counter[str] = Counter()

    def spent() -> bool:  # what the submission used, never the machine's load (Sandbox.used)
        return worker.used() > budget

    def sample() -> Sample:
        return Sample(len(judged), len(wanted), tuple(sorted(reached.items())))

    def entry(verdict: Verdict, found: list[Failure], page_html: str | None = None) -> Entry:
        """The entry as grading stands now (a copy: `checks` is still being filled)."""
        ran = sample() if judged else None
        return Entry(path, verdict, dict(checks), tuple(found), isolation, None, page_html, ran)

    def judge(run: Run) -> tuple[Checked, str]:
        key = _key(run)
        if key not in judged:
            if spent():
                raise OverBudget
            lockstep = run.script is None and "R1" in wanted[key]  # a pair's too: each alone
            expected = reference_trace(run.workload) if lockstep else None
            judged[key] = check_case(worker, case(run), wanted[key], expected)
            if all(v.check != "C1" for v in judged[key][0].violations):
                reached.update(run.labels)
        return judged[key]

    try:
        worker.start()
    except SubmissionError as e:
        isolation = worker.isolation or "unknown"
        checks["contract"] = GroupState.FAIL
        return entry(Verdict.FAIL, [Failure("C1", str(e))])
    except CheckerError as e:  # ours, as `schedcheck check`'s exit 3 (schedcheck/faults.py)
        return entry(Verdict.ERROR, [note(str(e))])
    isolation = worker.isolation  # the level in effect (docs/isolation.md)
    # The first run breaking each group, what broke, and its trace's length.
    failing: dict[str, tuple[Run, Violation, int, str]] = {}
    page_html: str | None = None
    try:
        runs = tried(size) if runs is None else runs
        for run in runs:
            known = wanted.get(_key(run), ())
            wanted[_key(run)] = known + tuple(c for c in run.checks if c not in known)
        checks["examples"] = GroupState.PASS
        for run in (r for r in runs if r.stage == EXAMPLES_STAGE):
            verdict, _ = judge(run)
            mine = [v for v in verdict.violations if v.check in run.checks]
            if not mine:
                continue
            checks["examples"] = GroupState.FAIL
            failures.append(failure(mine[0], case(run), len(verdict.trace.steps)))
            if mine[0].check == "C1":
                # It cannot even run the spec's examples: nothing else can be judged.
                checks["contract"] = GroupState.FAIL
                return entry(Verdict.FAIL, failures, page(worker, run.workload))
            break
        hangs, stopped = 0, []
        for run in (r for r in runs if r.stage != EXAMPLES_STAGE):
            if hangs >= HUNG_RUNS:
                said = f"grading stopped trying runs after {HUNG_RUNS} of them hung: groups "
                stopped.append(note(said + "marked 'not run' were not judged"))
                break
            if run.workload.sample_every and all(GROUP_OF[c] in failing for c in run.checks):
                continue  # a marathon (seconds) can fail no group that has not failed yet
            verdict, said = judge(run)
            hangs += hung(verdict.trace)
            for v in verdict.violations:
                if v.check in run.checks:
                    found = (run, v, len(verdict.trace.steps), said)
                    failing.setdefault(GROUP_OF[v.check], found)
        # A group only passes on evidence: most of the runs must have run to the end.
        completed = sum(all(v.check != "C1" for v in c.violations) for c, _ in judged.values())
        unfailed = GroupState.PASS if completed * 2 >= len(wanted) else GroupState.NOT_RUN
        for group in GROUPS:
            if group != "examples":
                checks[group] = GroupState.FAIL if group in failing else unfailed
        shrunk = [(f.workload, f.script, f.other) for f in failures if f.workload is not None]
        for group in sorted(failing, key=list(GROUPS).index):
            failures.append(shrink(worker, group, spent, shrunk, failing[group]))
        failures += stopped
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
        for group in GROUPS:
            if group != "examples":
                checks[group] = GroupState.FAIL if group in failing else GroupState.NOT_RUN
        reported = {f.check for f in failures}
        unshrunk = [
            failure(v, case(run), steps, said)
            for run, v, steps, said in failing.values()
            if v.check not in reported
        ]
        at_budget = note(
            f"grading stopped at its budget of {budget:g} s of the submission's time (CPU "
            "and hung calls); groups marked 'not run' were not judged"
        )
        return entry(Verdict.FAIL, [*failures, *unshrunk, at_budget])
    finally:
        worker.stop()
    failed = any(state is GroupState.FAIL for state in checks.values())
    return entry(Verdict.FAIL if failed else Verdict.PASS, failures, page_html)


def shrink(
    worker: Isolated,
    group: str,
    spent: Callable[[], bool],
    shrunk: list[Case],
    found: tuple[Run, Violation, int, str],
) -> Failure:
    """The smallest run breaking `group` that its test's search finds, narrowed to the
    group's checks, and what broke; the `found` run as it is where its test does not search
    (a worked example, a larger workload) or the search does not reproduce it (a
    submission whose result depends on what it ran before).

    One bug often breaks several groups: a small run already known to break something (the
    spec's worked example that failed, one shrunk for an earlier group) that breaks this one
    too is reported again instead of a new search. `shrunk` collects them."""

    checks = GROUPS[group]  # only these: no twin run unless D1, no reference unless R1

    def stop() -> None:
        if spent():
            raise OverBudget

    for known in shrunk:
        stop()
        if known[2] is not None and "D1" in checks:
            continue  # two schedulers have no twin run
        verdict, said = confirmed(worker, known, checks)
        if not verdict.ok:
            return failure(verdict.violations[0], known, len(verdict.trace.steps), said)
    run, violation, steps, said = found
    if run.stage in UNSEARCHED:
        return failure(violation, case(run), steps, said)
    search = next(s for s in searches() if s.test == run.test)
    narrowing = Narrowed(frozenset(checks), stop, shrinking=ShrinkBudget(SHRINKING))
    # A search that found it ends in its failure (or Flaky, where it lost it again).
    with narrowed(narrowing), contextlib.suppress(CheckFailed, Flaky):
        search.run(worker)
    if not narrowing.failing:
        again = "; it did not fail again when run again: the submission's result depends on "
        again += "what ran before it"
        return failure(violation, case(run), steps, said, again)
    last = narrowing.failing[-1]
    shrunk_case: Case = (last.workload, last.script, last.other)
    if last.which == 1:  # B's failure: the case is told from A, built first
        assert last.other is not None
        shrunk_case = (last.other, None, last.workload)
    checked, told = confirmed(worker, shrunk_case, checks)
    if checked.ok:  # a hang seen after a short wait that a full one does not confirm
        return failure(violation, case(run), steps, said)
    shrunk.append(shrunk_case)
    return failure(checked.violations[0], shrunk_case, len(checked.trace.steps), told)
    shrunk.append(shrunk_case)
    return failure(verdict.violations[0], shrunk_case, len(verdict.trace.steps), said)


def confirmed(worker: Isolated, of: Case, checks: tuple[str, ...]) -> tuple[Checked, str]:
    """check_case(), every call waited for in full: a run reported as hung hung for the
    whole call timeout (a search's candidates may be stopped after a short wait:
    Sandbox.hang_at)."""
    worker.strict = True
    try:
        return check_case(worker, of, checks)
    finally:
        worker.strict = False


def grade_many(
    paths: list[str], jobs: int, limits: Limits, budget: float, size: int = SAMPLE_SIZE
) -> list[Entry]:
    """Grade `paths` `jobs` at a time, each in processes of its own; report in path order.
    check's runs are collected once, here, for the whole class."""
    runs = tried(size) if paths else ()
    context = get_context("spawn")  # a fresh interpreter per grader: nothing is shared
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {p: pool.submit(grade_one, p, limits, budget, size, runs) for p in paths}
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
