"""schedcheck's pytest plugin: which implementation the properties drive, and whose fault a
failure is.

Installed, pytest loads it through the `pytest11` entry point, so it knows `--impl` before
it looks at the command line's paths: `pytest --impl /anywhere/p07_scheduler.py` works
with any path, relative or absolute, with or without `-n auto`.

In a course's repository, `pytest --impl mine/p07_scheduler.py` runs schedcheck's
properties (schedcheck/suite/: worked examples, invariants, differential, lockstep,
stateful) against that file, isolated, beside the course's own tests. A run that names
its own paths gets only those (add `--pyargs schedcheck.suite` to have ours too). Without
`--impl` the plugin adds nothing: no test, no marker, no profile loaded.

Options: `--impl PATH` (or SCHEDCHECK_IMPL; default "reference", the reference in
`scheduler/`), `--in-process`, `--call-timeout S`, `--memory-mb MB`. The Hypothesis
profiles are harness/search/profiles.py's; `--hypothesis-profile` picks one as usual.

With SCHEDCHECK_OUTCOMES=FILE, every finished test adds one JSON line to FILE: its
outcome and, for a failure, whether it is a verdict on the implementation (the ids of the
checks that fired, and schedcheck's own report) or our own fault (`"checks": null`):
`schedcheck check` turns that into its report and exit 1 or 3 (harness/faults.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from schedcheck import layout
from schedcheck.drive.impl import Implementation, open_impl
from schedcheck.drive.loader import REFERENCE
from schedcheck.faults import SubmissionError, best, verdict_checks
from schedcheck.sandbox.isolation import Limits
from schedcheck.search import profiles

OUTCOMES = "SCHEDCHECK_OUTCOMES"
CHECKED = "SCHEDCHECK_CONTRACT_CHECKED"  # the file whose contract the caller has checked
ISOLATION = pytest.StashKey[str]()

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
    if os.environ.get(OUTCOMES):
        config.pluginmanager.register(OutcomeLog(Path(os.environ[OUTCOMES]), config))
    where = config.getoption("--impl")
    if where == REFERENCE and not _a_checkouts_run(config):
        return  # not schedcheck's run: add nothing to it
    if where != REFERENCE:
        _add_the_suite(config)
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
    if os.environ.get(CHECKED) == str(Path(where).resolve()):
        return  # `schedcheck check` checked it, a moment ago, before it started this run
    try:  # the contract check: one message instead of a traceback in every test
        checked = open_impl(where, config.getoption("--in-process"), limits(config))
    except SubmissionError as e:
        pytest.exit(f"{where}: {e}", returncode=1)
    checked.stop()
    config.stash[ISOLATION] = checked.isolation


def _a_checkouts_run(config: pytest.Config) -> bool:
    """Whether this is a schedcheck checkout's own run: this one, or a copy of it (a
    remote xdist worker's)."""
    return (config.rootpath / "schedcheck" / "suite" / "holds.py").is_file()


def _add_the_suite(config: pytest.Config) -> None:
    """schedcheck's properties join a run that did not name its paths (testpaths or the
    current folder), unless they are in it already (a checkout's own run, or a run whose
    paths hold them)."""
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        return
    if _a_checkouts_run(config):
        return  # the checkout's testpaths hold the suite already
    suite = layout.SUITE.resolve()
    here = config.invocation_params.dir
    for arg in config.args:
        path = (here / arg.split("::")[0]).resolve()
        if path == suite or path in suite.parents or suite in path.parents:
            return
    config.args.append(str(suite))


def pytest_report_header(config: pytest.Config) -> str | None:
    if ISOLATION not in config.stash:
        return None
    return f"schedcheck: {config.getoption('--impl')}, isolation: {config.stash[ISOLATION]}"


@pytest.fixture(scope="session")
def impl(request: pytest.FixtureRequest) -> Iterator[Implementation]:
    """The implementation under test: the reference, or `--impl`'s file in a worker."""
    config = request.config
    implementation = open_impl(
        config.getoption("--impl"), config.getoption("--in-process"), limits(config)
    )
    yield implementation
    implementation.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under `schedcheck check`, a test whose stage must give way is skipped before it starts
    (schedcheck/suite/holds.py; no effect otherwise)."""
    holds = _holds()
    holds.running(item.path.name, item.nodeid)
    holds.give_way()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Mark each failure as a verdict (the checks that fired, the most informative report)
    or ours (None), where the exception is still at hand: under xdist only the report
    travels to the controller."""
    report = yield
    report.user_properties.append(("schedcheck_file", item.path.name))
    if report.failed:
        _holds().found(item.nodeid)  # a failure outside the checks' own paths too (ours, a crash)
        error = call.excinfo.value if call.excinfo is not None else None
        checks = None if error is None else verdict_checks(error)
        found = None if checks is None or error is None else best(error)
        report.user_properties.append(("schedcheck_checks", checks))
        if found is not None:
            report.user_properties.append(("schedcheck_report", str(found).strip("\n")))
            report.user_properties.append(("schedcheck_rank", list(found.rank)))
    return report


def _holds() -> ModuleType:
    """suite.holds, imported when a test runs, not with the plugin: a run of another copy of
    the suite (a remote xdist worker's checkout) collects its own `suite` package first."""
    from schedcheck.suite import holds

    return holds


class OutcomeLog:
    """Writes one JSON line per test outcome into FILE, in the process that reports: each
    test's result, and for a failure whose it is and schedcheck's own report of it."""

    def __init__(self, path: Path, config: pytest.Config) -> None:
        self.path = path
        self.worker = hasattr(config, "workerinput")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.worker:
            return  # an xdist worker: its controller writes what it reports
        if not (report.failed or report.skipped or report.when == "call"):
            return
        marks = dict(report.user_properties)
        line = {
            "test": report.nodeid,
            "when": report.when,
            "outcome": report.outcome,
            "checks": marks.get("schedcheck_checks"),  # absent (a crashed worker): ours
            "report": marks.get("schedcheck_report"),
            "rank": marks.get("schedcheck_rank"),
            "summary": report.longreprtext[-2000:] if report.failed else "",
            "file": marks.get("schedcheck_file"),
            "why": report.longrepr[2]
            if report.skipped and isinstance(report.longrepr, tuple)
            else "",
            "start": report.start,
            "stop": report.stop,
        }
        with self.path.open("a") as f:
            f.write(json.dumps(line) + "\n")
