"""In a pytest run that is not schedcheck's, the installed plugin changes nothing (issue
37): a course project's suite, run with `--junitxml` with the plugin and without it (as
if schedcheck were not installed), writes the same XML, timings aside; and its `--help`
gains only the plugin's own prefixed options and `--impl`."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import run_pytest

COURSE = {
    "conftest.py": """\
from hypothesis import settings

settings.register_profile("ci", max_examples=5)
settings.load_profile("ci")
""",
    "tests/test_queue.py": """\
import pytest
from hypothesis import given, strategies as st


@given(st.lists(st.integers()))
def test_sorted_is_idempotent(xs):
    assert sorted(sorted(xs)) == sorted(xs)


def test_a_property(record_property):
    record_property("course", "its own")


@pytest.mark.parametrize("n", [1, 2])
def test_parametrized(n):
    assert n


def test_fails():
    assert 1 == 2


@pytest.mark.skip(reason="later")
def test_skipped():
    pass
""",
}
TIMES = re.compile(r'\s(time|timestamp|hostname)="[^"]*"')
# Hypothesis's statistics property: its value is timings (base64)
STATISTICS = re.compile(r'(<property name="hypothesis-statistics-[^"]*" value=)"[^"]*"')


def course(tmp_path: Path) -> Path:
    for name, text in COURSE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def junit(folder: Path, *args: str) -> str:
    out = folder / f"junit{len(args)}.xml"
    done = run_pytest(f"--junitxml={out}", "-p", "no:randomly", *args, cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr  # test_fails, only
    return STATISTICS.sub(r'\1""', TIMES.sub("", out.read_text()))


def test_a_courses_junit_xml_is_the_same_with_and_without_the_plugin(tmp_path: Path) -> None:
    folder = course(tmp_path)
    with_plugin = junit(folder)
    without = junit(folder, "-p", "no:schedcheck.plugin")
    assert "schedcheck" not in with_plugin
    assert '<property name="course" value="its own"' in with_plugin  # the course's own stays
    assert with_plugin == without


def test_its_help_gains_only_the_prefixed_options(tmp_path: Path) -> None:
    folder = course(tmp_path)
    options = {}
    for name, args in (("with", ()), ("without", ("-p", "no:schedcheck.plugin"))):
        done = run_pytest("--help", *args, cwd=folder)
        assert done.returncode == 0, done.stderr
        options[name] = set(re.findall(r"^\s+(--[\w-]+)", done.stdout, re.M))
    added = options["with"] - options["without"]
    assert "--impl" in added
    assert all(o == "--impl" or o.startswith("--schedcheck-") for o in added), added
