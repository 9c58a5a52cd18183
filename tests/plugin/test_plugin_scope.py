"""The pytest plugin is schedcheck's alone: in schedcheck's own run it loads schedcheck's
profiles; in another project's run in the same environment (a course repository) it
leaves Hypothesis's settings as they were, and its options clash with none of the course's.

The course runs are subprocesses in a folder of their own (rootdir there: not a checkout's
run), whose conftest registers a Hypothesis profile named `ci` and declares its own
`--call-timeout`, the two names schedcheck used to take. Their one test prints what it sees.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from schedcheck.cli.stages import Settings, pytest_command
from schedcheck.search import profiles
from tests.catalogue import standalone
from tests.helpers import ROOT, run_pytest

OURS = (profiles.DEV, profiles.CI, profiles.FUZZ, profiles.GRADE)
SUBMISSION = str(standalone(ROOT / "tests" / "equivalents" / "one_pass.py"))
WARNING = "SchedcheckDeprecationWarning"

COURSE_TEST = """\
from hypothesis import given, settings, strategies as st

@given(st.integers())
def test_hypothesis_settings_are_its_own(x):
    assert settings.default.max_examples == 100, settings.default
"""

COURSE_CONFTEST = """\
from hypothesis import settings

settings.register_profile("ci", max_examples=7)  # the course's own ci


def pytest_addoption(parser):
    parser.addoption("--call-timeout", type=int, default=5, help="the course's own option")
"""

SEES = """\
import json

from hypothesis import settings
from hypothesis.errors import InvalidArgument


def registered(name):
    try:
        settings.get_profile(name)
    except InvalidArgument:
        return False
    return True


OURS = %s


def test_sees(pytestconfig):
    option = pytestconfig.getoption
    seen = {
        "profile": settings.get_current_profile_name(),
        "max_examples": settings.default.max_examples,
        "ours": [name for name in OURS if registered(name)],
        "call_timeout": option("--call-timeout", None),
        "schedcheck": [option("--schedcheck-call-timeout"), option("--schedcheck-memory-mb"),
                       option("--schedcheck-in-process")],
    }
    print("SEEN " + json.dumps(seen))
"""


def test_schedchecks_own_run_loads_its_profiles() -> None:
    current = settings.get_current_profile_name()
    assert current in OURS
    if current in {profiles.DEV, profiles.CI}:
        assert settings.default.max_examples == 200


@pytest.mark.parametrize("ci", ["", "true"])
def test_another_projects_run_is_left_alone(tmp_path: Path, ci: str) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_course.py").write_text(COURSE_TEST)
    done = run_pytest(cwd=tmp_path, env={"CI": ci})
    assert done.returncode == 0, done.stdout + done.stderr


def course(tmp_path: Path, name: str = "course", own_options: bool = True) -> Path:
    """A course's folder: its conftest (with or without its own `--call-timeout`) and the
    test that reports what it sees."""
    folder = tmp_path / name
    folder.mkdir()
    conftest = COURSE_CONFTEST if own_options else COURSE_CONFTEST.split("\n\n\ndef")[0]
    (folder / "conftest.py").write_text(conftest)
    (folder / "test_sees.py").write_text(SEES.replace("OURS = %s", f"OURS = {OURS!r}"))
    return folder


def seen(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """What the course's test printed."""
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("SEEN "))
    found: dict[str, Any] = json.loads(line.removeprefix("SEEN "))
    return found


@pytest.mark.parametrize("ci", ["", "true"])
def test_without_impl_the_courses_profile_and_option_win(tmp_path: Path, ci: str) -> None:
    done = run_pytest(
        "-s",
        "--hypothesis-profile=ci",
        "--call-timeout",
        "9",
        "test_sees.py",
        cwd=course(tmp_path),
        env={"CI": ci},
    )
    assert seen(done) == {
        "profile": "ci",
        "max_examples": 7,  # theirs
        "ours": [],  # nothing registered in Hypothesis's global registry
        "call_timeout": 9,
        "schedcheck": [2.0, 1024, False],
    }
    assert WARNING not in done.stdout


# pluggy calls the plugin registered last first: named before Hypothesis's, ours would be
# configured after it, too late, but for tryfirst.
ORDERS = {"autoloaded": {}, "ours named first": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}}


@pytest.mark.parametrize("order", ORDERS)
def test_with_impl_the_prefixed_profile_is_registered_before_hypothesis_loads_it(
    tmp_path: Path, order: str
) -> None:
    plugins = ["-p", "schedcheck.plugin", "-p", "_hypothesis_pytestplugin"] if ORDERS[order] else []
    done = run_pytest(
        "-s",
        *plugins,
        "--impl",
        SUBMISSION,
        "--hypothesis-profile=schedcheck-ci",
        "--schedcheck-call-timeout",
        "3",
        "--schedcheck-memory-mb=512",
        "--schedcheck-in-process",
        "--call-timeout",
        "9",
        "test_sees.py",
        cwd=course(tmp_path),
        env=ORDERS[order],
    )
    assert seen(done) == {
        "profile": profiles.CI,
        "max_examples": 200,
        "ours": list(OURS),
        "call_timeout": 9,  # the course's option, beside ours
        "schedcheck": [3.0, 512, True],
    }
    assert WARNING not in done.stdout


@pytest.mark.parametrize("ci", [None, "true"])
def test_with_impl_and_no_profile_named_ours_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ci: str | None
) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    # Hypothesis's own choice here: `ci` where it sees a CI service (the variable CI, or
    # another service's), `default` elsewhere.
    hypothesis = [
        sys.executable,
        "-c",
        "import hypothesis; print(hypothesis.settings.get_current_profile_name())",
    ]
    own = subprocess.run(hypothesis, capture_output=True, text=True, check=True).stdout.strip()
    assert own == "ci" or ci is None
    done = run_pytest("-s", "--impl", SUBMISSION, "test_sees.py", cwd=course(tmp_path))
    assert seen(done)["profile"] == {"default": profiles.DEV, "ci": profiles.CI}[own]


@pytest.mark.parametrize("old", sorted(profiles.OLD_NAMES))
def test_an_old_profile_name_selects_ours_with_a_warning(tmp_path: Path, old: str) -> None:
    done = run_pytest(
        "-s",
        "--impl",
        SUBMISSION,
        f"--hypothesis-profile={old}",
        "test_sees.py",
        cwd=course(tmp_path),
    )
    assert seen(done)["profile"] == f"schedcheck-{old}"  # even for ci, which the course has
    expected = f"{old} is deprecated; use --hypothesis-profile=schedcheck-{old}"
    assert f"{WARNING}: --hypothesis-profile={expected}" in done.stdout, done.stdout


@pytest.mark.parametrize("impl", [["--impl", SUBMISSION]], ids=["impl"])
def test_old_option_spellings_work_with_a_warning_unless_the_course_has_them(
    tmp_path: Path, impl: list[str]
) -> None:
    """In schedcheck's run (`--impl`) only: in any other the plugin adds no option but
    its prefixed ones (issue 37; the old spellings set the worker, which only that run has)."""
    plain = run_pytest("--memory-mb", "512", "test_sees.py", cwd=course(tmp_path, "plain"))
    assert plain.returncode == 4 and "--memory-mb" in plain.stderr, plain.stderr
    done = run_pytest(
        "-s",
        *impl,
        "--call-timeout",
        "9",
        "--memory-mb",
        "512",
        "--in-process",
        "test_sees.py",
        cwd=course(tmp_path),
    )
    assert seen(done)["call_timeout"] == 9  # the course's own: not ours, and no warning
    assert seen(done)["schedcheck"] == [2.0, 512, True]
    for old, new in [
        ("--memory-mb", "--schedcheck-memory-mb"),
        ("--in-process", "--schedcheck-in-process"),
    ]:
        assert f"{WARNING}: {old} is deprecated; use {new}" in done.stdout, done.stdout
    assert "--call-timeout is deprecated" not in done.stdout

    bare = course(tmp_path, "bare", own_options=False)
    done = run_pytest("-s", *impl, "--call-timeout=3", "test_sees.py", cwd=bare)
    assert seen(done)["schedcheck"] == [3.0, 1024, False]
    assert f"{WARNING}: --call-timeout is deprecated; use --schedcheck-call-timeout" in done.stdout


def test_check_names_the_prefixed_profile_and_options(tmp_path: Path) -> None:
    def command(profile: str) -> list[str]:
        chosen = Settings(Path("p07.py"), profile, "2", 1.5, 256, True, tmp_path, False)
        return pytest_command(chosen, tmp_path)

    assert "--hypothesis-profile=schedcheck-grade" in command("grade")  # the CLI's short name
    assert "--hypothesis-profile=schedcheck-grade" in command("schedcheck-grade")
    assert "--hypothesis-profile=mine" in command("mine")  # a profile of the user's own
    flags = command("grade")
    assert {"--schedcheck-call-timeout=1.5", "--schedcheck-memory-mb=256"} <= set(flags)
    assert "--schedcheck-in-process" in flags
    assert not {"--in-process", "--call-timeout=1.5", "--memory-mb=256"} & set(flags)
