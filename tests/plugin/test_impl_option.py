"""`pytest --impl FILE` and SCHEDCHECK_IMPL point the whole suite at a submission."""

from __future__ import annotations

import subprocess

from tests.catalogue import standalone
from tests.helpers import ROOT, run_pytest

MUTANT = str(standalone(ROOT / "tests" / "mutants" / "eos_zero_ignored.py"))
PROPERTY = "schedcheck/suite/test_properties.py::test_invariants_hold_at_every_step"


def pytest_run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The property, in a process of its own, in the ci profile: no database writes."""
    return run_pytest(*args, env={**(env or {}), "CI": "true"})


def test_impl_option_fails_a_buggy_submission_naming_the_check() -> None:
    done = pytest_run("--impl", MUTANT, PROPERTY)
    assert done.returncode == 1, done.stdout
    assert "A1 at step 1, update(): a1 is RUNNING after update() with output [0]" in done.stdout


def test_environment_variable_does_the_same() -> None:
    done = pytest_run(PROPERTY, env={"SCHEDCHECK_IMPL": MUTANT})
    assert done.returncode == 1, done.stdout
    assert "eos_token_id 0" in done.stdout


def test_missing_submission_is_a_usage_error() -> None:
    done = pytest_run("--impl", "no/such/p07_scheduler.py", PROPERTY)
    assert done.returncode == 4
    assert "--impl: no submission file at no/such/p07_scheduler.py" in done.stderr
