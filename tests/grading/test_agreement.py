"""`schedcheck grade` fails every submission `schedcheck check` fails, by the same group
(issue 56), on a corpus of whole student files with natural bugs (tests/students/): files
written from scratch, each in its own style, none a one-line edit of the reference. The
mutant catalogue's half of the same agreement is tests/suite/test_mutants_found.py; the
equivalents' (both pass) tests/product/test_equivalents.py.

Two a day in the default run (grading a failing file shrinks each failing group: seconds
each), every file under -m costly."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.catalogue import ROOT, check_fails_naming, grade_fails_as_check_did
from tests.helpers import rotation_day

STUDENTS = sorted((ROOT / "tests" / "students").glob("*.py"))
TODAY = {STUDENTS[(2 * rotation_day() + k) % len(STUDENTS)] for k in range(2)}


def test_the_corpus_is_whole_files_of_their_own() -> None:
    """A student file imports nothing of schedcheck (a teacher's class holds no such
    import) and says what its bug is and what catches it."""
    assert len(STUDENTS) >= 15
    for path in STUDENTS:
        text = path.read_text()
        assert "schedcheck" not in text, path.name
        assert text.startswith('"""Bug: '), path.name


@pytest.mark.heavy
@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=() if p in TODAY else pytest.mark.costly, id=p.stem) for p in STUDENTS],
)
def test_check_and_grade_fail_it_by_the_same_group(
    path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    grade_fails_as_check_did(path, check_fails_naming(path, capfd))
