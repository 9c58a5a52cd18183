"""schedcheck's pytest plugin: which implementation the properties drive, and whose fault a
failure is.

Installed, pytest loads it through the `pytest11` entry point, so it knows `--impl` before
it looks at the command line's paths: `pytest --impl /anywhere/p07_scheduler.py` works
with any path, relative or absolute, with or without `-n auto`.

In a course's repository, `pytest --impl mine/p07_scheduler.py` runs schedcheck's
properties (schedcheck/suite/: worked examples, invariants, differential, lockstep,
stateful, larger) against that file, isolated, beside the course's own tests; in a
schedcheck checkout, with no paths named, the properties alone (the checkout's own tests
check schedcheck, not the file). Their stages give way as `schedcheck check`'s do: once a
test of an earlier stage fails, a later stage's tests are skipped. A run that names its
own paths gets only those (add `--pyargs schedcheck.suite` to have ours too). Without
`--impl` the plugin adds nothing: no test, no marker, no user property, no option but
`--impl` and its prefixed ones, no Hypothesis profile registered or loaded (Hypothesis's
registry is global: a course's profiles keep their names and settings).

Options: `--impl PATH` (or SCHEDCHECK_IMPL; default "reference", the reference in
`scheduler/`), `--schedcheck-in-process`, `--schedcheck-call-timeout S`,
`--schedcheck-memory-mb MB`: prefixed, so as not to clash with a course's own options. The
Hypothesis profiles are schedcheck/search/profiles.py's (`schedcheck-dev`, `-ci`, `-fuzz`,
`-grade`), registered in schedcheck's run only (with `--impl`, or a checkout's own run);
`--hypothesis-profile` picks one as usual.

Renamed after 0.2, the old spellings work for one more version, each with a deprecation
warning in pytest's warnings summary, in schedcheck's run only: the options
`--in-process`, `--call-timeout`, `--memory-mb` (only where nothing else in the run
declares them: a course's conftest may have its own `--call-timeout`, and then it is
theirs), and the profile names `dev`, `ci`, `fuzz`, `grade`.

With SCHEDCHECK_OUTCOMES=FILE, every finished test adds one JSON line to FILE: its
outcome and, for a failure, whether it is a verdict on the implementation (the ids of the
checks that fired, and schedcheck's own report) or our own fault (`"checks": null`):
`schedcheck check` turns that into its report and exit 1 or 3 (schedcheck/faults.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import settings
from hypothesis.errors import InvalidArgument

from schedcheck import layout
from schedcheck.drive.impl import Implementation, open_impl
from schedcheck.drive.loader import REFERENCE
from schedcheck.faults import SubmissionError, best, verdict_checks
from schedcheck.sandbox.process import DEFAULT_CALL_TIMEOUT, DEFAULT_MEMORY_MB, Limits
from schedcheck.search import profiles

OUTCOMES = "SCHEDCHECK_OUTCOMES"
CHECKED = "SCHEDCHECK_CONTRACT_CHECKED"  # the file whose contract the caller has checked
ISOLATION = pytest.StashKey[str]()
ACTIVE = pytest.StashKey[bool]()  # set in schedcheck's run only: elsewhere no hook acts

IN_PROCESS = "--schedcheck-in-process"
CALL_TIMEOUT = "--schedcheck-call-timeout"
MEMORY_MB = "--schedcheck-memory-mb"
# The options' spellings up to 0.2, and what argparse needs to read each like its new one.
RENAMED: dict[str, tuple[str, dict[str, Any]]] = {
    "--in-process": (IN_PROCESS, {"nargs": 0, "const": True}),
    "--call-timeout": (CALL_TIMEOUT, {"type": float}),
    "--memory-mb": (MEMORY_MB, {"type": int}),
}
USED_OLD = "schedcheck_old_spellings"  # where _Renamed notes each old spelling it read


class SchedcheckDeprecationWarning(pytest.PytestDeprecationWarning):
    """A name of schedcheck's that the next version drops (an option, a profile): a course
    can filter it as `ignore::schedcheck.plugin.SchedcheckDeprecationWarning`."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("schedcheck")
    group.addoption(
        "--impl",
        default=os.environ.get("SCHEDCHECK_IMPL", REFERENCE),
        help="the submission file to check (default: the reference; env SCHEDCHECK_IMPL)",
    )
    group.addoption(
        IN_PROCESS,
        action="store_true",
        default=False,  # declared: an old spelling's hidden default must not take its place
        help="run the submission in the test process, not in an isolated worker (trusted code)",
    )
    group.addoption(
        CALL_TIMEOUT,
        type=float,
        default=DEFAULT_CALL_TIMEOUT,
        metavar="S",
        help=f"seconds for one schedule()/update() (default {DEFAULT_CALL_TIMEOUT:g})",
    )
    group.addoption(
        MEMORY_MB,
        type=int,
        default=DEFAULT_MEMORY_MB,
        metavar="MB",
        help=f"memory cap of the worker (default {DEFAULT_MEMORY_MB})",
    )


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Generator[None, object, object]:
    """Accept the options' old spellings, each that nothing else declares: after the initial
    conftests (a course's options are known by then; declaring ours first would make theirs
    fail to register), before pytest parses the command line for good."""
    loaded = yield
    if not _named_or_own(early_config, args):
        return loaded  # another project's run: no option but the prefixed ones
    group = parser.getgroup("schedcheck")
    for old, (new, how) in RENAMED.items():
        if _declared(parser, old):
            continue  # someone else's option of that name: theirs, untouched
        dest = new.removeprefix("--").replace("-", "_")
        hidden = argparse.SUPPRESS  # no help line, and no default over the new option's
        group.addoption(old, dest=dest, action=_Renamed, default=hidden, help=hidden, **how)
    return loaded


def _named_or_own(config: pytest.Config, args: list[str]) -> bool:
    """Before the command line is parsed: whether it names an implementation (`--impl`,
    SCHEDCHECK_IMPL) or this is a checkout's own run."""
    named = any(a == "--impl" or a.startswith("--impl=") for a in args)
    return named or bool(os.environ.get("SCHEDCHECK_IMPL")) or _a_checkouts_run(config)


def _declared(parser: pytest.Parser, option: str) -> bool:
    """Whether the run's parser knows `option` already; asked by parsing it alone, as pytest
    has no public list of the options declared."""
    try:
        _, unknown = parser.parse_known_and_unknown_args([option])
    except pytest.UsageError:
        return True  # known, and missing the value it takes
    return option not in unknown


class _Renamed(argparse.Action):
    """An option's old spelling: stores into the new option's place (the later of the two on
    the command line wins, as for one option given twice) and notes that it was used, for
    pytest_configure's deprecation warning."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)
        setattr(namespace, USED_OLD, (*getattr(namespace, USED_OLD, ()), option_string))


def limits(config: pytest.Config) -> Limits:
    return Limits(
        call_timeout=config.getoption(CALL_TIMEOUT),
        memory=config.getoption(MEMORY_MB) << 20,
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """In schedcheck's run only: register the profiles and choose one, add the suite, check
    the submission's contract. First of all pytest_configure hooks: Hypothesis's loads the
    profile `--hypothesis-profile` names in its own, so ours must be registered by then."""
    _warn_of_old_options(config)
    if os.environ.get(OUTCOMES):
        config.pluginmanager.register(OutcomeLog(Path(os.environ[OUTCOMES]), config))
    where = config.getoption("--impl")
    if where == REFERENCE and not _a_checkouts_run(config):
        return  # not schedcheck's run: add nothing to it
    config.stash[ACTIVE] = True
    if where != REFERENCE:
        _add_the_suite(config)
        _keep_the_stages_order(config)
    try:
        profiles.register(where, os.environ.get(profiles.URL))
    except profiles.DatabaseError as e:
        raise pytest.UsageError(str(e)) from None
    _choose_profile(config)
    if where == REFERENCE:
        return
    if not Path(where).is_file():
        raise pytest.UsageError(f"--impl: no submission file at {where}")
    if hasattr(config, "workerinput"):
        return  # the controller checked the contract already
    if os.environ.get(CHECKED) == str(Path(where).resolve()):
        return  # `schedcheck check` checked it, a moment ago, before it started this run
    try:  # the contract check: one message instead of a traceback in every test
        checked = open_impl(where, config.getoption(IN_PROCESS), limits(config))
    except SubmissionError as e:
        pytest.exit(f"{where}: {e}", returncode=1)
    checked.stop()
    config.stash[ISOLATION] = checked.isolation


def _warn_of_old_options(config: pytest.Config) -> None:
    """A deprecation warning for each old option spelling the command line used (in the
    controller: an xdist worker reads the same command line, and its warning would repeat)."""
    if hasattr(config, "workerinput"):
        return
    for old in dict.fromkeys(getattr(config.option, USED_OLD, ())):
        new = RENAMED[old][0]
        _deprecated(config, f"{old} is deprecated; use {new} (the next version drops {old})")


def _choose_profile(config: pytest.Config) -> None:
    """Which of our profiles the run loads: the one `--hypothesis-profile` names (Hypothesis's
    plugin loads it after this), an old name mapped to the new one, or, none named, dev
    (schedcheck-ci where Hypothesis loaded its own `ci` because the variable CI is set)."""
    named = config.getoption("--hypothesis-profile", None)  # None: Hypothesis's plugin is off
    if named in profiles.OLD_NAMES:
        new = profiles.OLD_NAMES[named]
        if not hasattr(config, "workerinput"):  # the controller warned already
            _deprecated(
                config,
                f"--hypothesis-profile={named} is deprecated; use --hypothesis-profile={new} "
                f"(in the next version, {named!r} is Hypothesis's or your own profile)",
            )
        # Hypothesis's pytest_configure reads the option after ours (tryfirst) and loads it.
        config.option.hypothesis_profile = new
        named = new
    if named:
        _registered(named)
    else:
        current = settings.get_current_profile_name()
        if current in ("default", "ci"):
            settings.load_profile(profiles.CI if current == "ci" else profiles.DEV)


def _registered(name: str) -> None:
    """A profile nobody registered is the user's mistake, said here (pytest's usage error,
    exit 4), not a traceback from Hypothesis's plugin loading it (an internal error). By
    now a course's conftest.py, loaded before any pytest_configure, has registered its own."""
    try:
        settings.get_profile(name)
    except InvalidArgument:
        ours = ", ".join(profiles.OLD_NAMES.values())
        raise pytest.UsageError(
            f"--hypothesis-profile {name}: no Hypothesis profile of that name is registered "
            f"(schedcheck's: {ours}; or one your conftest.py registers)"
        ) from None


def _deprecated(config: pytest.Config, message: str) -> None:
    """Issue `message` as a deprecation warning: pytest shows it in the warnings summary, and
    a course's filterwarnings applies to it."""
    config.issue_config_time_warning(SchedcheckDeprecationWarning(message), stacklevel=3)


def _a_checkouts_run(config: pytest.Config) -> bool:
    """Whether this is a schedcheck checkout's own run: this one, or a copy of it (a
    remote xdist worker's). Told by its rootdir, its configuration file or the folder it
    was started in: `--impl /tmp/p07_scheduler.py` makes pytest take /tmp for the rootdir
    (an argument that is an existing path counts toward it), and then it finds no
    configuration file either."""
    places = [config.rootpath, config.invocation_params.dir]
    if config.inipath is not None:
        places.append(config.inipath.parent)
    return any((place / "schedcheck" / "suite" / "holds.py").is_file() for place in places)


def _add_the_suite(config: pytest.Config) -> None:
    """schedcheck's properties join a run that did not name its paths (testpaths or the
    current folder), unless they are in it already (a run whose paths hold them). In a
    checkout they are the run: its testpaths are schedcheck's own self-checks, none of
    which is about the file (issue 37)."""
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        return
    suite = layout.SUITE.resolve()
    if _a_checkouts_run(config):
        config.args[:] = [str(suite)]
        return
    here = config.invocation_params.dir
    for arg in config.args:
        path = (here / arg.split("::")[0]).resolve()
        if path == suite or path in suite.parents or suite in path.parents:
            return
    config.args.append(str(suite))


def _keep_the_stages_order(config: pytest.Config) -> None:
    """A plain `pytest --impl` run gives way as `check` does (schedcheck/suite/holds.py):
    once an earlier stage's test found a failure, a later stage's tests are skipped, so
    the verdict comes as soon as check's. In the controller, before xdist starts its
    workers: they inherit the environment. `check` sets its own."""
    holds = _holds()
    if hasattr(config, "workerinput") or os.environ.get(holds.FOUND):
        return
    found = tempfile.mkdtemp(prefix="schedcheck-found-")
    config.add_cleanup(lambda: shutil.rmtree(found, ignore_errors=True))
    os.environ[holds.FOUND] = found
    os.environ[holds.ORDER] = " ".join(holds.STAGE_FILES)

    def forget() -> None:
        os.environ.pop(holds.FOUND, None)
        os.environ.pop(holds.ORDER, None)

    config.add_cleanup(forget)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In schedcheck's run, the suite's tests in the order of its stages (worked examples
    first), wherever they were collected from: pytest collects a folder's files by name
    (test_large.py before test_seed_examples.py), and xdist hands out tests in collection
    order, so a buggy file's verdict would wait for a later stage's long runs. Only the
    suite's places in the list are reordered; a course's own tests keep theirs."""
    if not config.stash.get(ACTIVE, False):
        return
    order = {name.rstrip("!"): i for i, name in enumerate(_holds().STAGE_FILES)}
    suite = layout.SUITE.resolve()
    places = [i for i, item in enumerate(items) if item.path.parent.resolve() == suite]
    ours = sorted((items[i] for i in places), key=lambda item: order.get(item.path.name, 99))
    for i, item in zip(places, ours, strict=True):
        items[i] = item


def pytest_report_header(config: pytest.Config) -> str | None:
    if ISOLATION not in config.stash:
        return None
    return f"schedcheck: {config.getoption('--impl')}, isolation: {config.stash[ISOLATION]}"


@pytest.fixture(scope="session")
def impl(request: pytest.FixtureRequest) -> Iterator[Implementation]:
    """The implementation under test: the reference, or `--impl`'s file in a worker."""
    config = request.config
    implementation = open_impl(
        config.getoption("--impl"), config.getoption(IN_PROCESS), limits(config)
    )
    yield implementation
    implementation.stop()


@pytest.fixture(scope="session")
def submission(impl: Implementation) -> Implementation:
    """The implementation under test, when it is not the reference itself (the tests that
    hold it to the reference: R1). Skipping here, before Hypothesis starts, keeps a skip
    from being reported as a failing example. Session-scoped like `impl`: Hypothesis
    refuses a function-scoped fixture in a @given test (health check
    function_scoped_fixture), which failed every correct submission."""
    if impl.label == REFERENCE:
        pytest.skip("R1 compares an implementation with the reference: here they are one")
    return impl


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """In schedcheck's run, a test whose stage must give way is skipped before it starts
    (schedcheck/suite/holds.py); in any other run, nothing."""
    if not item.config.stash.get(ACTIVE, False):
        return
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
    if not item.config.stash.get(ACTIVE, False):
        return report  # another project's run: its reports stay as they were
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
