"""What `schedcheck check`'s stages try, as plain data: every run its worked examples, its
properties, its stateful test and its larger stage make, in each test's order, with the
checks the test runs (issue 56).

In check's profile (schedcheck-grade) each stage's test is derandomized, and what it draws
depends on nothing the submission does (the properties aim their search at the reference's
preemptions: test_properties.label). So a test that fails a submission at its k-th run has
tried exactly the first k runs it makes on a submission that passes. `tried()` collects
those by running the suite's very tests, in a fresh process under that profile, on a
recorder that answers as the reference does. `schedcheck grade` runs every one of them on
every submission: whatever check fails, grade fails, on the same runs.
"""

from __future__ import annotations

import functools
import pickle
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from schedcheck.drive.impl import Implementation, reference
from schedcheck.faults import CheckerError
from schedcheck.invariants.checks import CHECKS
from schedcheck.model.trace import Trace
from schedcheck.model.workload import Script, Workload
from schedcheck.search import profiles
from schedcheck.strategies.coverage import observe

__all__ = ["EXAMPLES_TEST", "Run", "searches", "tried"]

_T = TypeVar("_T")
EXAMPLES_TEST = "test_seed_examples.py::test_worked_example"


@dataclass(frozen=True)
class Run:
    """One run a test of check's makes: a driver run of `workload`, a stateful run of its
    `script`, or two schedulers alive at once (`workload`'s built first, then `other`'s),
    judged by `checks`; `labels` are the hard parts the reference shows on `workload`
    (strategies/coverage.py; none for a stateful run, which the labels do not read)."""

    test: str  # the suite's test: "test_properties.py::test_invariants_hold_at_every_step"
    checks: tuple[str, ...]
    workload: Workload
    script: Script | None = None
    labels: frozenset[str] = frozenset()
    other: Workload | None = None

    @property
    def stage(self) -> str:
        """The suite's file the test is in: check's stage."""
        return self.test.split("::", 1)[0]


@dataclass(frozen=True)
class Search:
    """One of check's Hypothesis tests: its name, its function (given's wrapper), the
    fixture it takes the implementation as, and its checks."""

    test: str
    function: Callable[..., None]
    argument: str
    checks: tuple[str, ...]

    def run(self, impl: Any) -> None:
        """The test, as pytest would run it with `impl` as the implementation under test."""
        self.function(**{self.argument: impl})


def searches() -> tuple[Search, ...]:
    """check's Hypothesis tests in the order of its stages. Imported here, not at the top:
    their settings are fixed when their modules are imported, under the profile loaded
    then (the stateful test's examples are twice the profile's)."""
    from schedcheck.suite import test_large as large
    from schedcheck.suite import test_properties as props
    from schedcheck.suite import test_state_machine as stateful

    return (
        Search(
            "test_properties.py::test_invariants_hold_at_every_step",
            props.test_invariants_hold_at_every_step,
            "impl",
            props.INVARIANTS,
        ),
        Search(
            "test_properties.py::test_preemption_never_changes_the_output",
            props.test_preemption_never_changes_the_output,
            "impl",
            props.DIFFERENTIAL,
        ),
        Search(
            "test_properties.py::test_lockstep_with_the_reference",
            props.test_lockstep_with_the_reference,
            "submission",
            props.LOCKSTEP,
        ),
        Search(
            "test_properties.py::test_two_schedulers_alive_at_once",
            props.test_two_schedulers_alive_at_once,
            "impl",
            props.TWO_ALIVE,
        ),
        Search(
            "test_state_machine.py::test_state_machine",
            stateful.test_state_machine,
            "impl",
            stateful.CHECKS,
        ),
        Search(
            "test_large.py::test_every_check_holds_on_big_configurations",
            large.test_every_check_holds_on_big_configurations,
            "impl",
            large.CHECKS,
        ),
        Search(
            "test_large.py::test_every_check_holds_on_long_runs",
            large.test_every_check_holds_on_long_runs,
            "impl",
            large.CHECKS,
        ),
        Search(
            "test_large.py::test_lockstep_holds_over_a_marathon",
            large.test_lockstep_holds_over_a_marathon,
            "submission",
            large.MARATHON,
        ),
    )


def examples_runs() -> list[Run]:
    """The worked examples stage's runs: each of the spec's examples with every check (the
    values its tables assert are the reference's, which R1 holds a submission to), and
    each again with a second update() after every step (C1, A1)."""
    from schedcheck.suite.test_seed_examples import EXAMPLES

    workloads = [example.workload() for example in EXAMPLES.values()]
    again = "test_seed_examples.py::test_second_update_does_nothing"
    return [
        Run(EXAMPLES_TEST, tuple(CHECKS), w, None, frozenset(observe(w))) for w in workloads
    ] + [Run(again, ("C1", "A1"), replace(w, reupdate=True)) for w in workloads]


class Recorder:
    """An implementation (the reference by default) noting each run a test asks of it:
    not the twin runs verify() makes of a workload for D1, which are no draw of the test."""

    def __init__(self, impl: Implementation | None = None) -> None:
        self.runs: list[tuple[Workload, Script | None, Workload | None]] = []
        self.impl = reference() if impl is None else impl
        self.label = self.impl.label  # the reference: verify() runs no second one for R1
        self.isolation = self.impl.isolation

    @property
    def output(self) -> str:
        return self.impl.output

    def run(self, workload: Workload) -> Trace:
        return self.impl.run(workload)

    def run_while(self, workload: Workload, meanwhile: Callable[[], _T]) -> tuple[Trace, _T]:
        self.runs.append((workload, None, None))
        return self.impl.run_while(workload, meanwhile)

    def play(self, workload: Workload, script: Script) -> Trace:
        self.runs.append((workload, script, None))
        return self.impl.play(workload, script)

    def run_pair(self, first: Workload, second: Workload) -> tuple[Trace, Trace]:
        self.runs.append((first, None, second))
        return self.impl.run_pair(first, second)

    def stop(self) -> None:
        self.impl.stop()


def collect(examples: int, impl: Implementation | None = None) -> list[Run]:
    """Every run check's stages make on a passing submission (by default the reference,
    in process), with `examples` a property (the profile's max_examples; check's own is
    schedcheck-grade's). Call it in a process that has not imported the suite's test
    modules (tried() makes one)."""
    from hypothesis import settings

    profiles.register()
    name = f"{profiles.GRADE}-{examples}"
    settings.register_profile(name, settings.get_profile(profiles.GRADE), max_examples=examples)
    settings.load_profile(name)
    runs = examples_runs()
    recorder = Recorder(impl)
    for search in searches():
        recorder.runs.clear()
        search.run(recorder)
        for workload, script, other in recorder.runs:
            labels = frozenset(observe(workload)) if script is None else frozenset()
            runs.append(Run(search.test, search.checks, workload, script, labels, other))
    return runs


@functools.cache
def tried(examples: int) -> tuple[Run, ...]:
    """collect(examples), made in a fresh interpreter (see collect), once per process. A
    child of ours, not multiprocessing's spawn: that would import the caller's main script
    again."""
    command = [sys.executable, "-m", __name__, str(examples)]
    done = subprocess.run(command, capture_output=True, check=False)
    if done.returncode != 0:
        raise CheckerError(
            f"collecting the runs check makes failed: {done.stderr.decode(errors='replace')}"
        )
    runs: list[Run] = pickle.loads(done.stdout)  # our own child's: trusted
    return tuple(runs)


if __name__ == "__main__":
    # Through the module's own name: what is pickled here must unpickle as its Run.
    from schedcheck.suite.tried import collect as _collect

    sys.stdout.buffer.write(pickle.dumps(_collect(int(sys.argv[1]))))
