"""Suite-wide setup: the Hypothesis profiles, and which implementation the suite drives.

Profiles (choose with `--hypothesis-profile NAME`):
- dev (default): 200 examples per property, random, with the local example database.
- ci: derandomized, no deadline, no database, print_blob: the same examples on every run,
  a regression gate that cannot flake. Hypothesis loads it by itself where CI is set.
- fuzz: 20,000 examples per property, example database on, for long hunts.
- grade: what checking a submission uses: derandomized, so two gradings agree.

The implementation: `--impl PATH` or the SCHEDCHECK_IMPL environment variable; the
default, "reference", is the reference scheduler in `scheduler/`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from harness.impl import Implementation, open_impl
from harness.isolation import Limits, SubmissionError
from harness.loader import REFERENCE

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=200, **_COMMON)  # type: ignore[arg-type]
settings.register_profile(
    "ci", max_examples=200, derandomize=True, database=None, print_blob=True, **_COMMON
)  # type: ignore[arg-type]
settings.register_profile("fuzz", max_examples=20_000, **_COMMON)  # type: ignore[arg-type]
settings.register_profile(
    "grade", max_examples=300, derandomize=True, database=None, print_blob=True, **_COMMON
)  # type: ignore[arg-type]
if settings.get_current_profile_name() == "default":
    settings.load_profile("dev")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--impl",
        default=os.environ.get("SCHEDCHECK_IMPL", REFERENCE),
        help="the submission file to check (default: the reference; env SCHEDCHECK_IMPL)",
    )
    parser.addoption(
        "--in-process",
        action="store_true",
        help="run the submission in the test process, not in an isolated worker (trusted code)",
    )
    parser.addoption(
        "--call-timeout", type=float, default=2.0, help="seconds for one schedule()/update()"
    )
    parser.addoption("--memory-mb", type=int, default=1024, help="memory cap of the worker")


def _limits(config: pytest.Config) -> Limits:
    return Limits(
        call_timeout=config.getoption("--call-timeout"),
        memory=config.getoption("--memory-mb") << 20,
    )


def pytest_configure(config: pytest.Config) -> None:
    where = config.getoption("--impl")
    if where == REFERENCE:
        return
    if not Path(where).is_file():
        raise pytest.UsageError(f"--impl: no submission file at {where}")
    if hasattr(config, "workerinput"):
        return  # the controller checked the contract already
    try:  # the contract check: one message instead of a traceback in every test
        open_impl(where, config.getoption("--in-process"), _limits(config)).stop()
    except SubmissionError as e:
        pytest.exit(f"{where}: {e}", returncode=1)


@pytest.fixture(scope="session")
def impl(request: pytest.FixtureRequest) -> Iterator[Implementation]:
    """The implementation under test: the reference, or `--impl`'s file in a worker."""
    config = request.config
    implementation = open_impl(
        config.getoption("--impl"), config.getoption("--in-process"), _limits(config)
    )
    yield implementation
    implementation.stop()
