"""The pytest plugin is schedcheck's alone: in schedcheck's own run it loads schedcheck's
profiles; in another project's run in the same environment (a course repository) it
leaves Hypothesis's settings as they were."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from tests.helpers import run_pytest

COURSE_TEST = """\
from hypothesis import given, settings, strategies as st

@given(st.integers())
def test_hypothesis_settings_are_its_own(x):
    assert settings.default.max_examples == 100, settings.default
"""


def test_schedchecks_own_run_loads_its_profiles() -> None:
    current = settings.get_current_profile_name()
    assert current in {"dev", "ci", "fuzz", "grade"}
    if current in {"dev", "ci"}:  # ours: Hypothesis's built-in ci has 100 examples
        assert settings.default.max_examples == 200


@pytest.mark.parametrize("ci", ["", "true"])
def test_another_projects_run_is_left_alone(tmp_path: Path, ci: str) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_course.py").write_text(COURSE_TEST)
    done = run_pytest(cwd=tmp_path, env={"CI": ci})
    assert done.returncode == 0, done.stdout + done.stderr
