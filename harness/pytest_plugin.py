"""schedcheck's pytest plugin: which implementation the suite drives, and whose fault a failure is.

Installed, it is registered through the `pytest11` entry point, so pytest knows `--impl`
before it looks at the command line's paths: `pytest --impl /anywhere/p07_scheduler.py`
works from the checkout with any path, relative or absolute, `--impl PATH` or
`--impl=PATH`, with or without `-n auto`. (Named only in a conftest.py, the option is not
known yet when pytest reads an absolute path outside the checkout: it takes the file for
a test path, picks its folder as rootdir and never loads the conftest.) The root
conftest.py names this module too, for a checkout that was not installed.

Options: `--impl PATH` (or SCHEDCHECK_IMPL; default "reference", the reference in
`scheduler/`), `--in-process`, `--call-timeout S`, `--memory-mb MB`. The Hypothesis
profiles are harness/search/profiles.py's.

With SCHEDCHECK_OUTCOMES=FILE, every failed test adds one JSON line to FILE saying whether
it is a verdict on the implementation (the ids of the checks that fired) or our own fault
(`"checks": null`): `schedcheck check` turns that into exit 1 or 3 (harness/faults.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from harness.drive.loader import REFERENCE
from harness.faults import SubmissionError, verdict_checks
from harness.sandbox.impl import Implementation, open_impl
from harness.sandbox.isolation import PROJECT, Limits
from harness.search import profiles

OUTCOMES = "SCHEDCHECK_OUTCOMES"
ISOLATION = pytest.StashKey[str]()
MARKERS = (
    "costly: a self-check too slow for every run; `pytest -m costly` runs them all "
    "(.ci/run does), the default run a rotating few",
    "redis: needs redis-server and the [redis] extra (skipped without them, unless "
    "SCHEDCHECK_REQUIRE_REDIS is set)",
)

# Registered now, so that --hypothesis-profile finds them; loaded (and registered again for
# --impl's file) in pytest_configure, only in a run that is schedcheck's: another project's
# pytest run in the same environment keeps Hypothesis's settings as they were.
profiles.register(activate=False, ci=False)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("schedcheck")
    group.addoption(
        "--impl",
        default=os.environ.get("SCHEDCHECK_IMPL", REFERENCE),
        help="the submission file to check (default: the reference; env SCHEDCHECK_IMPL)",
    )
    group.addoption(
        "--in-process",
        action="store_true",
        help="run the submission in the test process, not in an isolated worker (trusted code)",
    )
    group.addoption(
        "--call-timeout", type=float, default=2.0, help="seconds for one schedule()/update()"
    )
    group.addoption("--memory-mb", type=int, default=1024, help="memory cap of the worker")


def limits(config: pytest.Config) -> Limits:
    return Limits(
        call_timeout=config.getoption("--call-timeout"),
        memory=config.getoption("--memory-mb") << 20,
    )


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    if os.environ.get(OUTCOMES):
        config.pluginmanager.register(OutcomeLog(Path(os.environ[OUTCOMES]), config))
    where = config.getoption("--impl")
    if where == REFERENCE and config.rootpath.resolve() != PROJECT:
        return  # not schedcheck's run: add nothing to it
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
        checked = open_impl(where, config.getoption("--in-process"), limits(config))
    except SubmissionError as e:
        pytest.exit(f"{where}: {e}", returncode=1)
    checked.stop()
    config.stash[ISOLATION] = checked.isolation


def pytest_report_header(config: pytest.Config) -> str | None:
    if ISOLATION not in config.stash:
        return None
    return f"schedcheck: {config.getoption('--impl')}, isolation: {config.stash[ISOLATION]}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Costly self-checks run only when asked for (`-m costly`, or any -m expression): done
    here, not in addopts, so that it holds wherever pytest found its rootdir."""
    if config.getoption("markexpr"):
        return
    costly = [item for item in items if item.get_closest_marker("costly")]
    if costly:
        config.hook.pytest_deselected(items=costly)
        items[:] = [item for item in items if not item.get_closest_marker("costly")]


@pytest.fixture(scope="session")
def impl(request: pytest.FixtureRequest) -> Iterator[Implementation]:
    """The implementation under test: the reference, or `--impl`'s file in a worker."""
    config = request.config
    implementation = open_impl(
        config.getoption("--impl"), config.getoption("--in-process"), limits(config)
    )
    yield implementation
    implementation.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Mark each failure as a verdict (the checks that fired) or ours (None), where the
    exception is still at hand: under xdist only the report travels to the controller."""
    report = yield
    if report.failed:
        error = call.excinfo.value if call.excinfo is not None else None
        checks = None if error is None else verdict_checks(error)
        report.user_properties.append(("schedcheck_checks", checks))
    return report


class OutcomeLog:
    """Writes one JSON line per failed test into FILE, in the process that reports."""

    def __init__(self, path: Path, config: pytest.Config) -> None:
        self.path = path
        self.worker = hasattr(config, "workerinput")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.worker or not report.failed:
            return  # an xdist worker: its controller writes what it reports
        marks = dict(report.user_properties)
        line = {
            "test": report.nodeid,
            "when": report.when,
            "checks": marks.get("schedcheck_checks"),  # absent (a crashed worker): ours
            "summary": report.longreprtext[-2000:],
        }
        with self.path.open("a") as f:
            f.write(json.dumps(line) + "\n")
