"""`pytest --impl FILE` and SCHEDCHECK_IMPL point the whole suite at a submission."""

from __future__ import annotations

import subprocess

from schedcheck.suite.holds import STAGE_FILES
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


def test_the_suite_runs_in_the_order_of_its_stages_however_it_was_named() -> None:
    """pytest collects a folder's files by name (test_large.py first); xdist hands tests out
    in collection order: the worked examples must come first, or a buggy file's verdict
    waits for the larger stage's long runs (issue 37)."""
    stages = [name.rstrip("!") for name in STAGE_FILES]
    for named in ([], ["--pyargs", "schedcheck.suite"]):
        done = pytest_run("--impl", MUTANT, "--collect-only", *named)
        assert done.returncode == 0, done.stdout + done.stderr
        files = [line.split("::")[0].rsplit("/", 1)[-1] for line in done.stdout.splitlines()]
        files = [name for name in files if name in stages]
        assert len(set(files)) == len(stages), (named, done.stdout)
        assert files == sorted(files, key=stages.index), (named, files)
