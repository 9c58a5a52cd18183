"""Suite-wide setup: the Hypothesis profiles, and which implementation the suite drives.

Profiles (choose with `--hypothesis-profile NAME`; see harness/profiles.py): dev (the
default), ci (derandomized, loaded by itself where CI is set), fuzz (long hunts) and grade
(what checking a submission uses). With SCHEDCHECK_REDIS_URL set, dev and fuzz share their
counterexamples through Redis and ci replays them (docs/scale.md).

The implementation: `--impl PATH` or the SCHEDCHECK_IMPL environment variable; the
default, "reference", is the reference scheduler in `scheduler/`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import profiles
from harness.impl import Implementation, open_impl
from harness.isolation import Limits, SubmissionError
from harness.loader import REFERENCE

profiles.register()  # now, so that --hypothesis-profile finds them; again once --impl is known


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
    try:
        profiles.register(where, os.environ.get(profiles.URL))
    except profiles.DatabaseError as e:
        raise pytest.UsageError(str(e)) from None
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
