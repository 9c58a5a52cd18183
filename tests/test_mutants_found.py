"""The suite catches every mutant of the catalogue, through the path `schedcheck check`
takes (an isolated worker, the suite's strategies, shrinking), names the check the bug
points to, and keeps the counterexample small; the reference goes through clean.

This checks the suite itself: the search has its own fixed, derandomized settings and does
not depend on `--impl`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis.errors import NoSuchExample

from harness.search.hunt import hunt
from tests.helpers import ROOT

MUTANTS = ROOT / "tests" / "mutants"


def expected_checks(path: Path) -> set[str]:
    """The checks a mutant's docstring says catch it: "Caught by I1 or I7."."""
    found = re.search(r"Caught by ([^.]*)\.", path.read_text())
    assert found, f"{path.name}: the docstring must say 'Caught by <check>.'"
    return set(re.findall(r"\b[A-Z]\d\b", found.group(1)))


def test_catalogue_has_at_least_25_mutants() -> None:
    assert len(list(MUTANTS.glob("*.py"))) >= 25


@pytest.mark.parametrize("mutant", sorted(p.stem for p in MUTANTS.glob("*.py")))
def test_mutant_is_caught_by_the_check_it_names(mutant: str) -> None:
    path = MUTANTS / f"{mutant}.py"
    caught = hunt(path)
    assert caught.check in expected_checks(path), caught.verdict.report()
    assert caught.requests <= 4, caught.verdict.report()


def test_the_reference_goes_through_clean() -> None:
    with pytest.raises(NoSuchExample):
        hunt(ROOT / "scheduler" / "__init__.py")
