"""What `schedcheck grade` runs is what `schedcheck check`'s stages try (issue 56): the
same tests, the same draws, whatever the submission does."""

from __future__ import annotations

import subprocess
import sys

from schedcheck.suite import test_large, test_properties, test_state_machine
from schedcheck.suite.tried import searches
from tests.catalogue import standalone
from tests.helpers import ROOT

SAME = """
import sys
from schedcheck.drive.impl import open_impl
from schedcheck.suite.tried import collect

on_the_reference = collect(20)
on_a_file = collect(20, open_impl(sys.argv[1]))
print(len(on_the_reference), on_the_reference == on_a_file)
"""


def test_the_runs_do_not_depend_on_the_submission() -> None:
    """Collected on the reference in process, or on a correct file written otherwise in a
    worker: the same runs, in the same order (the properties aim at the reference's
    preemptions, never the submission's)."""
    other = standalone(ROOT / "tests" / "equivalents" / "functional_style.py")
    done = subprocess.run(
        [sys.executable, "-c", SAME, str(other)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    count, same = done.stdout.split()
    assert int(count) > 100 and same == "True", done.stdout


def test_every_search_of_check_is_one_grade_runs() -> None:
    """A Hypothesis test added to a stage of check and not to tried.searches() would be a
    search grade never makes: a bug check finds and grade passes."""
    given = {
        f"{module.__name__.rsplit('.', 1)[-1]}.py::{name}"
        for module in (test_properties, test_state_machine, test_large)
        for name, value in vars(module).items()
        if name.startswith("test_") and hasattr(value, "hypothesis")
    }
    assert given == {search.test for search in searches()}
