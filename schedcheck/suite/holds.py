"""What every property does with one workload: run the checks, fail with the whole report."""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import reject
from hypothesis.control import current_build_context, currently_in_test_context

from schedcheck.drive.impl import Implementation
from schedcheck.faults import CheckFailed
from schedcheck.invariants.violation import Violation
from schedcheck.model.regression import Regression
from schedcheck.model.trace import Trace
from schedcheck.model.workload import Script, Workload
from schedcheck.verdict.report import pair_hints, pair_report, replay_hints
from schedcheck.verdict.verify import rank, verify, verify_pair

# The suite's files in the order of `check`'s stages ("!": a stage that stops at its first
# failure). `check` and a plain `pytest --impl` run keep this order alike (ORDER).
STAGE_FILES = (
    "test_seed_examples.py!",
    "test_properties.py",
    "test_state_machine.py",
    "test_large.py",
)
PROGRESS = "SCHEDCHECK_PROGRESS"  # a folder: one byte per example, in a file per stage
FOUND = "SCHEDCHECK_FOUND"  # a folder: a file per test that found a failure, per stage
ORDER = "SCHEDCHECK_STAGES"  # the stage files in order; a trailing "!": stop at its first


class ShrinkBudget:
    """How long one test may shrink its failure, for workloads that cost a run of hundreds
    of steps each (the larger stage): once the budget is spent, the shrinker's further
    candidates are rejected unrun, and the smallest failure found so far is the one
    reported (Hypothesis replays it last: it is known, so it runs)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.since: float | None = None  # when this test's first failure was found
        self.failing: set[str] = set()  # the failing workloads, as JSON

    def spent(self, run: Workload | str) -> bool:
        """Whether `run` (a workload, or a key of a run of other kind) is to be rejected."""
        if self.since is None or time.monotonic() - self.since <= self.seconds:
            return False
        return _keyed(run) not in self.failing

    def failed(self, run: Workload | str) -> None:
        self.since = time.monotonic() if self.since is None else self.since
        self.failing.add(_keyed(run))


def _keyed(run: Workload | str) -> str:
    return run if isinstance(run, str) else run.to_json(indent=None)


def within_budget(run: Workload | str, budget: ShrinkBudget | None = None) -> None:
    """Reject `run` unrun once its test's shrinking budget is spent: the test's own
    (`budget`, the larger stage's), or the one grade narrowed it with."""
    if any(b.spent(run) for b in _budgets(budget)):
        reject()


def _budgets(budget: ShrinkBudget | None) -> list[ShrinkBudget]:
    narrowing = _narrowed[-1].shrinking if _narrowed else None
    return [b for b in (budget, narrowing) if b is not None]


@dataclass(frozen=True)
class Failing:
    """A failing run, as grade's narrowed search keeps it: the workload, the script of a
    stateful run, the other workload of two schedulers alive at once (this run's being
    `which` of them: 0 built first), and the first violation."""

    workload: Workload
    script: Script | None
    violation: Violation
    other: Workload | None = None
    which: int = 0


@dataclass
class Narrowed:
    """A stage's test run on a submission by `schedcheck grade` to shrink one check group's
    failure (schedcheck/grading/grade.py): only `checks` are checked, `stop()` is called
    before each example (grade's time budget: it raises to end the search), and each
    failing run is kept, so that the last one is the shrunk counterexample (Hypothesis
    replays it last)."""

    checks: frozenset[str]
    stop: Callable[[], None] = lambda: None
    failing: list[Failing] = field(default_factory=list)
    shrinking: ShrinkBudget | None = None  # how long a failure may be shrunk


_narrowed: list[Narrowed] = []


@contextmanager
def narrowed(narrowing: Narrowed) -> Iterator[Narrowed]:
    """Run the suite's tests narrowed to `narrowing.checks` while in this block."""
    _narrowed.append(narrowing)
    try:
        yield narrowing
    finally:
        _narrowed.remove(narrowing)


def only(checks: tuple[str, ...]) -> tuple[str, ...]:
    """The checks a test runs: its own, or the part of them grade narrowed it to."""
    if not _narrowed:
        return checks
    return tuple(c for c in checks if c in _narrowed[-1].checks)


def failed(failing: Failing, run: Workload | str, budget: ShrinkBudget | None = None) -> None:
    """Note a failing run (`run`: its key, as within_budget has it) for the shrinking
    budgets, and for grade's narrowed search (nothing outside one)."""
    for each in _budgets(budget):
        each.failed(run)
    if _narrowed:
        _narrowed[-1].failing.append(failing)


def assert_holds(
    impl: Implementation,
    workload: Workload,
    checks: tuple[str, ...],
    budget: ShrinkBudget | None = None,
) -> Trace:
    """Run `checks` on `impl`; fail with the full report and a way to replay it."""
    give_way()
    within_budget(workload, budget)
    with in_full_when_final(impl):
        verdict = verify(impl, workload, only(checks))
    tick()
    if not verdict.ok:
        found(hang=hung(verdict.trace))
        failed(Failing(workload, None, verdict.violations[0]), workload, budget)
        saved = save_failure(workload, verdict.violations[0])
        verdict.require(replay_hints(impl.label, workload, saved))
    return verdict.trace


def assert_pair_holds(
    impl: Implementation, pair: tuple[Workload, Workload], checks: tuple[str, ...]
) -> None:
    """Two schedulers alive at once (issue 47): `checks` on each one's trace; fail with the
    report of the first that broke, saying which and showing the other one's workload.
    A second view of what the properties check of one scheduler: it gives way to their
    failure (a bug that one scheduler shows is better shown, and shrunk, with one)."""
    give_way(second_view=True)
    key = pair[0].to_json(indent=None) + pair[1].to_json(indent=None)
    within_budget(key)
    with in_full_when_final(impl):
        verdicts = verify_pair(impl, *pair, only(checks))
    tick()
    for which, verdict in enumerate(verdicts):
        if verdict.ok:
            continue
        first = verdict.violations[0]
        found(hang=hung(verdict.trace))
        failed(Failing(pair[which], None, first, pair[1 - which], which), key)
        text = pair_report(which, verdict.report(), pair[1 - which])
        hints = pair_hints(impl.label, *pair)
        raise CheckFailed(first.check, f"\n{text}\n\n{hints}", rank(first, pair[which]))


def tick() -> None:
    """Count one example for `schedcheck check`'s progress line: a byte appended to the
    stage's file in the folder SCHEDCHECK_PROGRESS names (one write, atomic between xdist's
    processes)."""
    where, test = os.environ.get(PROGRESS), _current()
    if where and test:
        fd = os.open(Path(where, _stage(test)), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, b".")
        finally:
            os.close(fd)


# `schedcheck check` runs its stages in one pytest session (one start-up, both cores busy to
# the end) and keeps their order with two rules: a test gives way (is skipped) once a test
# of an earlier stage has found a failure, and, in a stage marked "!", once another test of
# its own stage has. A failure is announced when it is found, before it is shrunk, so a
# later stage stops within one example, never after an earlier stage's shrinking.


def found(test: str = "", hang: bool = False) -> None:
    """Announce that the current test (or `test`, a node id) has found a failure (a no-op
    outside `check`); with `hang`, that its implementation has hung (issue 54): every other
    test, of any stage, gives way to it, as one hang's shrinking is all a student needs
    to see, and three at once would triple the wait for it."""
    where, test = os.environ.get(FOUND), test or _current()
    if where and test:
        folder = Path(where, _stage(test))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / hashlib.sha1(test.encode()).hexdigest()).touch()
        if hang:
            with contextlib.suppress(FileExistsError), open(Path(where, HANG), "x") as f:
                f.write(test)  # the first to hang keeps it


HANG = "hang"  # in the FOUND folder: the node id of the first test whose run hung


def hung(trace: Trace) -> bool:
    """Whether the run stopped at a call that did not return in time."""
    return trace.failure is not None and trace.failure.hung


@contextmanager
def in_full_when_final(impl: Implementation) -> Iterator[None]:
    """Hypothesis's final replay of a failing example waits for every call in full (the
    user's call timeout): a hang found after a short wait while shrinking (Sandbox.hang_at)
    is confirmed before it is reported."""
    context = current_build_context() if currently_in_test_context() else None
    # An explicit example (the regression corpus) runs "final" too, with no choices drawn:
    # it is no replay of a shrunk failure, and the first of them to hang waits in full.
    final = context is not None and context.is_final and bool(context.data.choices)
    if not final or not hasattr(impl, "strict"):
        yield
        return
    impl.strict = True
    try:
        yield
    finally:
        impl.strict = False


def give_way(second_view: bool = False) -> None:
    """Skip the current test if an earlier stage (or, in a "!" stage, or for a test that is
    a `second_view` of what its stage's others check, another test of this one) has found a
    failure; where grade narrows the test, ask its budget. Called before each example:
    pytest's Skipped is not an Exception, and Hypothesis lets it through, shrinking or not."""
    if _narrowed:
        _narrowed[-1].stop()
    where, test = os.environ.get(FOUND), _current()
    if not where or not test:
        return
    try:
        hanging = Path(where, HANG).read_text()
    except OSError:
        hanging = ""
    if hanging and hanging != test:
        pytest.skip("another test found a hang")
    me, mine = _stage(test), hashlib.sha1(test.encode()).hexdigest()
    for stage in os.environ.get(ORDER, "").split():
        name, serial = stage.rstrip("!"), stage.endswith("!")
        try:
            others = [f for f in os.listdir(Path(where, name)) if name != me or f != mine]
        except OSError:
            others = []
        if name == me:
            if serial and others:
                pytest.skip("another worked example failed")
            if second_view and others:
                pytest.skip("another test of this stage failed")
            return
        if others:
            pytest.skip("an earlier stage failed")


_running = ["", ""]  # the running test's file name and node id, set by the plugin


def running(file: str, test: str) -> None:
    """Note the test about to run (its file names its stage): schedcheck/plugin.py."""
    _running[:] = [file, test]


def _current() -> str:
    return _running[1]


def _stage(test: str) -> str:
    return _running[0] if test == _running[1] else test.split("::", 1)[0].rsplit("/", 1)[-1]


def save_failure(workload: Workload, violation: Violation) -> Path | None:
    """Write the workload where SCHEDCHECK_SAVE_FAILURES says, one file per check, in the
    regression corpus's format. Hypothesis runs the shrunk example last: the file keeps it.
    """
    where = os.environ.get("SCHEDCHECK_SAVE_FAILURES")
    if not where:
        return None
    path = Path(where) / f"{violation.check}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(Regression(workload, violation.check, str(violation)).to_json())
    return path
