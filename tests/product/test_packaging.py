"""One package (issues 17 and 25): the wheel holds, byte for byte, the files the tests run,
under one importable name, `schedcheck`, as an editable install does; installed into a
fresh venv it works from a course's own folder, even one whose project has modules named
like the rooms of the checkout (scheduler, invariants, strategies).

The fresh venv gets its dependencies from the package index pip is configured with, as a
course's CI would. One venv serves the module's tests (they only read from it). The default
run builds the wheel and reads it; what needs the venv is `costly` (CI runs it)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.catalogue import standalone
from tests.engine_subjects.catalogue import CORRECT as CORRECT_ENGINE
from tests.helpers import ROOT

EQUIVALENT = ROOT / "tests" / "equivalents" / "while_true.py"
MUTANT = ROOT / "tests" / "mutants" / "preempts_oldest.py"
# A course project with modules named like ours: none of them may shadow ours or be shadowed.
COURSE = {
    "scheduler.py": "raise ImportError('the course scheduler, not schedcheck')\n",
    "invariants.py": "raise ImportError('the course invariants')\n",
    "strategies/__init__.py": "",
    "harness/__init__.py": "",
    "model/__init__.py": "",
    "conftest.py": "",
    "tests/__init__.py": "",
    "tests/test_course.py": (
        "def test_the_course_keeps_its_own_modules():\n"
        "    import harness, strategies\n"
        "    assert 'site-packages' not in harness.__file__ + strategies.__file__\n"
    ),
}


# The test `check` prints for a student to paste, for one of the spec's workloads: it must
# run with nothing but the installed package (its public API).
HINTS = (
    "import json, textwrap\n"
    "from schedcheck.strategies.examples import EXAMPLES\n"
    "from schedcheck.verdict.report import replay_hints\n"
    "text = replay_hints('mine/p07_scheduler.py', EXAMPLES['example2'], None)\n"
    "test = textwrap.dedent(text.split('test file:', 1)[1])\n"
    "print(json.dumps(test))\n"
)


def sh(*command: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy (pip builds in the source tree), once for the whole run: under
    xdist the workers share their base temp's parent, and the first to get the lock builds
    (ten seconds) while the others wait for it."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if base.name.startswith("popen-gw") else base
    with open(shared / "wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = shared / "wheel"
        if not out.is_dir():
            _build(out)
    (found,) = out.glob("schedcheck-*.whl")
    return found


def _build(out: Path) -> None:
    scratch = out.with_name("wheel-building")
    shutil.rmtree(scratch, ignore_errors=True)
    source = scratch / "checkout"
    skip = (".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis")
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*skip, "mutants"))
    shutil.copytree(ROOT / "tests" / "mutants", source / "tests" / "mutants")
    built = sh(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", scratch, source, cwd=scratch
    )
    assert built.returncode == 0, built.stdout + built.stderr
    scratch.rename(out)  # whole or not at all: a failed build leaves no wheel to find


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fresh venv's bin/ folder, schedcheck installed from the wheel."""
    where = tmp_path_factory.mktemp("venv") / "venv"
    made = sh(sys.executable, "-m", "venv", where, cwd=where.parent)
    assert made.returncode == 0, made.stderr
    done = sh(where / "bin" / "python", "-m", "pip", "install", "-q", wheel, cwd=where.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    return where / "bin"


@pytest.fixture
def course(tmp_path: Path) -> Path:
    for name, text in COURSE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "p07_scheduler.py").write_text(EQUIVALENT.read_text())
    standalone(MUTANT, tmp_path / "mine")
    return tmp_path


def package_files() -> dict[str, Path]:
    """What the package holds in the checkout, by its name inside the wheel: every file
    below schedcheck/ (through the links to scheduler/, invariants/, strategies/, docs/)
    but caches, and of docs/ only the two the wheel takes."""
    found = {}
    for folder, dirs, files in os.walk(ROOT / "schedcheck", followlinks=True):
        dirs[:] = [d for d in dirs if d not in ("__pycache__", ".hypothesis")]
        for name in files:
            path = Path(folder) / name
            inside = path.relative_to(ROOT).as_posix()
            if inside.startswith("schedcheck/docs/") and name not in ("spec.md", "contract.md"):
                continue
            if name.endswith((".py", ".json", ".md")):
                found[inside] = path
    return found


@pytest.mark.heavy
def test_the_wheel_holds_the_checkouts_files_byte_for_byte(wheel: Path) -> None:
    archive = zipfile.ZipFile(wheel)
    held = {n: archive.read(n) for n in archive.namelist() if not n.endswith("/")}
    held = {n: data for n, data in held.items() if ".dist-info/" not in n}
    ours = package_files()
    assert sorted(held) == sorted(ours)
    different = [name for name, path in ours.items() if path.read_bytes() != held[name]]
    assert not different, different


def test_an_editable_install_exposes_the_same_one_name(tmp_path: Path) -> None:
    """From a folder of its own (not the checkout's root, which holds the rooms' folders),
    the rooms are importable under schedcheck only, from this checkout's files."""
    code = (
        "import importlib, json, schedcheck.scheduler, schedcheck.invariants.checks\n"
        "leaked = []\n"
        "for name in ('scheduler', 'invariants', 'strategies', 'harness', 'suite', 'model'):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "        leaked.append(name)\n"
        "    except ImportError:\n"
        "        pass\n"
        "print(json.dumps([leaked, schedcheck.scheduler.__file__]))\n"
    )
    done = sh(sys.executable, "-c", code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    leaked, where = json.loads(done.stdout)
    assert leaked == []
    assert Path(where).resolve() == (ROOT / "scheduler" / "__init__.py").resolve()


def test_only_schedcheck_is_installed(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"schedcheck", f"{wheel.name.split('-py3')[0]}.dist-info"}, tops
    assert not any("/tests/" in name or name.startswith("tests/") for name in names)
    assert "schedcheck/suite/test_properties.py" in names
    assert "schedcheck/docs/spec.md" in names and "schedcheck/docs/contract.md" in names
    assert any(n.startswith("schedcheck/suite/regressions/") for n in names)


@pytest.mark.costly
def test_check_from_a_course_folder(venv: Path, course: Path) -> None:
    passed = sh(venv / "schedcheck", "check", cwd=course)  # mine/p07_scheduler.py
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "PASS mine/p07_scheduler.py: every check holds" in passed.stdout
    failed = sh(venv / "schedcheck", "check", "mine/preempts_oldest.py", cwd=course)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "FAIL mine/preempts_oldest.py: F1" in failed.stdout


@pytest.mark.costly
def test_pytest_impl_runs_ours_beside_the_courses_tests(venv: Path, course: Path) -> None:
    alone = sh(venv / "pytest", "-q", "-p", "no:cacheprovider", cwd=course)
    assert alone.returncode == 0 and "1 passed" in alone.stdout, alone.stdout + alone.stderr
    both = sh(
        venv / "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        "--impl",
        "mine/p07_scheduler.py",
        "--hypothesis-profile",
        "schedcheck-ci",
        cwd=course,
    )
    assert both.returncode == 0, both.stdout + both.stderr
    ran = int(both.stdout.split(" passed")[0].rsplit(None, 1)[-1])
    assert ran > 10, both.stdout  # the course's one test, and schedcheck's properties
    wrong = sh(
        venv / "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--impl",
        "mine/preempts_oldest.py",
        "-x",
        cwd=course,
    )
    assert wrong.returncode == 1 and "F1 at step" in wrong.stdout, wrong.stdout + wrong.stderr


@pytest.mark.costly
def test_every_mode_works_installed(venv: Path, course: Path) -> None:
    cmd = venv / "schedcheck"
    mine = "mine/p07_scheduler.py"
    for args in (
        ["check", mine, "--exhaustive", "--scope", "smoke"],
        ["check", mine, "--replay", str(ROOT / "schedcheck" / "suite" / "regressions")],
        ["check", mine, "--gradescope", "results.json"],
        ["fuzz", mine, "--minutes", "0.1", "--out", "found"],
        ["grade", "mine", "--out", "graded", "--sample", "20"],
        ["engine", str(CORRECT_ENGINE), "--examples", "50"],  # its worker, installed
    ):
        done = sh(cmd, *args, cwd=course)
        assert done.returncode == 0, (args, done.stdout + done.stderr)
    graded = json.loads((course / "graded" / "report.json").read_text())
    verdicts = {Path(e["path"]).name: e["verdict"] for e in graded["submissions"]}
    assert verdicts == {"p07_scheduler.py": "pass", "preempts_oldest.py": "fail"}
    hints = json.loads(sh(venv / "python", "-c", HINTS, cwd=course).stdout)
    (course / "tests" / "test_regression.py").write_text(hints)
    pasted = sh(
        venv / "pytest", "-q", "-p", "no:cacheprovider", "tests/test_regression.py", cwd=course
    )
    assert pasted.returncode == 0 and "1 passed" in pasted.stdout, pasted.stdout + pasted.stderr
    for doc, first in (("spec", "# The P07 scheduler"), ("contract", "#")):
        shown = sh(cmd, doc, cwd=course)
        assert shown.returncode == 0 and shown.stdout.startswith(first), shown.stdout[:200]
