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
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, settings

from harness.loader import REFERENCE, load_impl

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


def pytest_configure(config: pytest.Config) -> None:
    where = config.getoption("--impl")
    if where != REFERENCE and not Path(where).is_file():
        raise pytest.UsageError(f"--impl: no submission file at {where}")


@pytest.fixture(scope="session")
def impl(request: pytest.FixtureRequest) -> ModuleType:
    """The module under test: any module that defines the contract's names."""
    return load_impl(request.config.getoption("--impl"))
