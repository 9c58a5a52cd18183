"""The suite catches every mutant of the catalogue, through the path `schedcheck check`
takes (an isolated worker, the suite's strategies, shrinking), names the check the bug
points to, and keeps the counterexample small; a correct file goes through clean.

Two ways: `hunt` (one Hypothesis search, the catalogue's own yardstick, every mutant on
every run), and `schedcheck check` itself, whose FAIL must name a check and show nothing
that is the checker's own fault, and which `schedcheck grade` must fail by a group of a
check it named (a rotating few per run, all with `pytest -m costly`).
This checks the suite itself: the searches have their own fixed, derandomized settings
and do not depend on `--impl`.
"""

from __future__ import annotations

import pytest
from hypothesis import Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from schedcheck.drive.isolated import Isolated
from schedcheck.invariants.catalogue import IDS
from schedcheck.sandbox.process import Limits
from schedcheck.search.hunt import SEARCH, hunt
from schedcheck.strategies.large import big, long, marathon
from schedcheck.strategies.workloads import pairs
from schedcheck.suite.test_large import MARATHON
from schedcheck.suite.test_properties import TWO_ALIVE
from schedcheck.verdict.verify import verify_pair
from tests.catalogue import (
    HANGING,
    check_fails_naming,
    expected_checks,
    found_by_the_larger_stage,
    found_by_the_marathon,
    found_by_two_schedulers,
    grade_fails_as_check_did,
    standalone,
)
from tests.helpers import ROOT, rotation_day

MUTANTS = ROOT / "tests" / "mutants"
NAMES = sorted(p.stem for p in MUTANTS.glob("*.py"))
CHECK_IDS = set(IDS)


# A hang costs a call timeout per shrinking step (35 s): only in the costly run.
# So does a larger stage's shrinking (about 40 s): those too only in the costly run.
_QUICK = [
    name
    for name in NAMES
    if name not in HANGING
    and not found_by_the_larger_stage(MUTANTS / f"{name}.py")
    and not found_by_the_marathon(MUTANTS / f"{name}.py")
]
ROTATING = {_QUICK[(3 * rotation_day() + k) % len(_QUICK)] for k in range(3)}
# Of those, the one graded as well in the default run (grading a failing file shrinks each
# failing group: tens of seconds); every mutant is graded under -m costly.
GRADED = _QUICK[(3 * rotation_day()) % len(_QUICK)]


def test_catalogue_has_at_least_25_mutants() -> None:
    assert len(NAMES) >= 25
    assert all(expected_checks(MUTANTS / f"{name}.py") <= CHECK_IDS for name in NAMES)


# A hang costs one call timeout per shrinking step. A quarter second is ample for the
# microseconds a call takes here, and a busy machine cannot turn it into a false hang: a
# call that is only waiting for a core is not timed out (schedcheck/sandbox/process.py).
HANGS = {name: Limits(call_timeout=0.25) for name in HANGING}


# The larger stage's search, as `check` runs it (without its shrinking, which costs a run
# of hundreds of steps per candidate): the first failing workload of 40.
LARGER = settings(SEARCH, max_examples=40, phases=[Phase.generate])


# Each hunt costs seconds to a minute (a search, then its shrinking, in a worker): all of
# them under -m costly. The default run sees a check that stops firing all the same:
# tests/suite/test_regressions.py replays each mutant's shrunk counterexample, and three
# mutants a day go through `schedcheck check` below.
@pytest.mark.costly
@pytest.mark.parametrize("mutant", NAMES)
def test_mutant_is_caught_by_the_check_it_names(mutant: str) -> None:
    path = MUTANTS / f"{mutant}.py"
    if found_by_the_marathon(path):
        # the stage's own search: its one marathon, unshrunk (a run of seconds a candidate)
        first = settings(SEARCH, max_examples=1, phases=[Phase.generate])
        caught = hunt(standalone(path), None, first, marathon(), MARATHON)
        assert caught.check in expected_checks(path), caught.verdict.report()
        with pytest.raises(NoSuchExample):  # and the larger stage's own shapes do not
            hunt(standalone(path), None, LARGER, st.one_of(big(), long()))
        return
    if found_by_the_larger_stage(path):
        workloads = st.one_of(big(), long())
        caught = hunt(standalone(path), HANGS.get(mutant), LARGER, workloads)
        assert caught.check in expected_checks(path), caught.verdict.report()
        with pytest.raises(NoSuchExample):  # and the ordinary search does not
            hunt(standalone(path), search=settings(SEARCH, max_examples=300))
        return
    if found_by_two_schedulers(path):
        worker = Isolated(standalone(path), Limits(call_timeout=0.5))
        try:
            pair = find(
                pairs(),
                lambda p: not all(v.ok for v in verify_pair(worker, *p, TWO_ALIVE)),
                settings=SEARCH,
            )
            first = next(v for v in verify_pair(worker, *pair, TWO_ALIVE) if not v.ok)
        finally:
            worker.stop()
        assert first.violations[0].check in expected_checks(path), first.report()
        assert sum(len(w.requests) for w in pair) <= 4, pair
        with pytest.raises(NoSuchExample):  # and no run of one scheduler shows it
            hunt(standalone(path), search=settings(SEARCH, max_examples=300))
        return
    caught = hunt(standalone(path), HANGS.get(mutant))
    assert caught.check in expected_checks(path), caught.verdict.report()
    assert caught.requests <= 4, caught.verdict.report()


def test_a_correct_file_goes_through_a_hunt_clean() -> None:
    """hunt's own false-FAIL guard, on the reference under a path of its own (R1 runs).
    100 examples: every mode's full guard is tests/product/test_equivalents.py."""
    with pytest.raises(NoSuchExample):
        hunt(
            ROOT / "tests" / "equivalents" / "one_pass.py",
            search=settings(SEARCH, max_examples=100),
        )


@pytest.mark.heavy
@pytest.mark.parametrize(
    "mutant",
    [pytest.param(m, marks=() if m in ROTATING else pytest.mark.costly) for m in NAMES],
)
def test_schedcheck_check_fails_it_naming_the_check(
    mutant: str, capfd: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    path = MUTANTS / f"{mutant}.py"
    named = check_fails_naming(standalone(path), capfd)
    # And grade fails it too (issue 56), every mutant under -m costly, one a day by default.
    if mutant != GRADED and request.node.get_closest_marker("costly") is None:
        return
    grade_fails_as_check_did(standalone(path), named)
