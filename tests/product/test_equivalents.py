"""No false FAIL: every mode of schedcheck passes every correct implementation.

The subjects are tests/equivalents/ (correct schedulers written differently) and the
reference itself, as one file under a name that is not the reference's, so that no check
is skipped for it (R1 compares an implementation with the reference: for the reference
by its own name, R1 has nothing to compare). Each runs through the isolated path, as a
student's file does.

Cheap modes run on every subject in every run. The costly ones (`check`, `--exhaustive`,
`pytest --impl`, a `fuzz` campaign) run on a rotating few here (the renamed reference and
an equivalent that changes with the date) and on all of them with `pytest -m costly`,
which `.ci/run` does in a step of its own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from schedcheck import faults
from schedcheck.cli.main import main
from tests.catalogue import reference_source
from tests.helpers import QUICK_PROFILE, ROOT, quick, rotation_day, run_pytest

EQUIVALENTS = ROOT / "tests" / "equivalents"
RENAMED = "reference_renamed"
SUBJECTS = [RENAMED, *sorted(p.stem for p in EQUIVALENTS.glob("*.py"))]
# Which equivalent the default run gives the costly modes, beside the renamed reference:
# another every day. SCHEDCHECK_ROTATION=N picks the N-th instead (to reproduce a day's run).
TODAY = SUBJECTS[1:][rotation_day() % (len(SUBJECTS) - 1)]
ROTATING = {RENAMED, TODAY}


def _param(*values: str, default_run: bool) -> object:
    return pytest.param(*values, marks=() if default_run else pytest.mark.costly)


COSTLY = [_param(name, default_run=name in ROTATING) for name in SUBJECTS]
# `schedcheck check` whole (30 s a subject): every subject at check's own profile under
# -m costly; in the default run, today's equivalent at tests/quick_profile.py's (every stage,
# every property, 20 examples each: 5 s).
CHECKED = [
    pytest.param(TODAY, True, id=f"{TODAY}-quick"),
    *(pytest.param(name, False, id=name, marks=pytest.mark.costly) for name in SUBJECTS),
]
# Every spelling on every subject under -m costly; one in the default run. RELPATH is the
# path relative to the checkout (it starts with ../), the others are absolute.
STYLES = {"--impl PATH": "", "--impl=PATH -n 2": TODAY, "--impl RELPATH": ""}
COSTLY_STYLES = [
    _param(name, style, default_run=STYLES[style] == name) for name in SUBJECTS for style in STYLES
]
# What only our own faults print (acceptance: a pass is a pass of the checks, nothing else).
OURS = ("FailedHealthCheck", "INTERNALERROR", "UsageError", "schedcheck itself failed")


def reference_as_one_file(folder: Path) -> Path:
    """The reference as one standalone module, the way a student's file looks."""
    path = folder / "p07_scheduler.py"
    path.write_text(reference_source())
    return path


@pytest.fixture(scope="module")
def subjects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every subject as `<folder outside the checkout>/<name>/p07_scheduler.py`."""
    root = tmp_path_factory.mktemp("class")
    found = {}
    for name in SUBJECTS:
        (root / name).mkdir()
        if name == RENAMED:
            found[name] = reference_as_one_file(root / name)
        else:
            found[name] = root / name / "p07_scheduler.py"
            shutil.copy(EQUIVALENTS / f"{name}.py", found[name])
    return found


def test_every_equivalent_says_what_makes_it_different() -> None:
    assert len(SUBJECTS) - 1 >= 10
    for name in SUBJECTS[1:]:
        text = (EQUIVALENTS / f"{name}.py").read_text()
        assert text.startswith('"""Equivalent: '), name
        assert not re.search(
            r"^\s*(from|import) (schedcheck|scheduler|harness|invariants|strategies)\b", text, re.M
        ), name


def test_the_renamed_reference_is_the_reference(subjects: dict[str, Path]) -> None:
    """It must not fall back on the reference's name: its label is its path."""
    text = subjects[RENAMED].read_text()
    assert "class Scheduler" in text and "import scheduler" not in text


@pytest.mark.parametrize("name", SUBJECTS)
def test_replaying_every_regression_passes(
    name: str, subjects: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "check",
            str(subjects[name]),
            "--replay",
            str(ROOT / "schedcheck" / "suite" / "regressions"),
        ]
    )
    out = capsys.readouterr().out
    assert code == faults.PASS, out
    assert "every check holds on" in out


@pytest.mark.heavy
@pytest.mark.parametrize(
    "sample",
    [
        pytest.param("20", id="sample-20"),
        pytest.param("200", id="sample-200", marks=pytest.mark.costly),
    ],
)
def test_grading_gives_every_subject_full_marks(
    sample: str, subjects: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The default run grades the rotating two (the renamed reference, today's equivalent);
    # -m costly every subject at the full sample.
    names = ROTATING if sample == "20" else set(SUBJECTS)
    paths = [str(subjects[name]) for name in sorted(names)]
    assert main(["grade", *paths, "--out", str(tmp_path), "-j", "2", "--sample", sample]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    graded = {Path(e["path"]).parent.name: e for e in report["submissions"]}
    assert set(graded) == names
    for name, entry in graded.items():
        assert entry["verdict"] == "pass", (name, entry["failures"])
        assert set(entry["checks"].values()) == {"pass"}, (name, entry["checks"])


@pytest.mark.heavy
@pytest.mark.parametrize(("name", "fast"), CHECKED)
def test_check_passes(
    name: str,
    fast: bool,
    subjects: dict[str, Path],
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    profile = ["--profile", QUICK_PROFILE] if fast else []
    if fast:
        quick(monkeypatch)
    code = main(["check", str(subjects[name]), "-n", "0", *profile])
    out, err = capfd.readouterr()
    assert code == faults.PASS, out + err
    assert "PASS" in out and not any(sign in out + err for sign in OURS)


@pytest.mark.parametrize("name", COSTLY)
def test_exhaustive_passes(
    name: str, subjects: dict[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    # The default run checks the mode on the smoke scope; -m costly on the default scope.
    scope = "small" if name not in ROTATING else "smoke"
    code = main(["check", str(subjects[name]), "--exhaustive", "--scope", scope, "-n", "1"])
    out, err = capfd.readouterr()
    assert code == faults.PASS, out + err
    assert "every behaviour reachable in the scope satisfies every check" in out


@pytest.mark.parametrize(("name", "style"), COSTLY_STYLES)
def test_pytest_impl_with_an_absolute_path_outside_the_checkout(
    name: str, style: str, subjects: dict[str, Path]
) -> None:
    """From the checkout, no test path given: pytest must read PATH as --impl's value."""
    path = str(subjects[name].resolve())
    assert not path.startswith(str(ROOT.resolve()))
    args = style.replace("RELPATH", os.path.relpath(path, ROOT)).replace("PATH", path).split()
    selected = "test_lockstep or test_worked_example"  # the property that needs --impl most
    # The default run's one spelling at the quick profile; -m costly's at schedcheck-ci.
    fast = STYLES[style] == name
    profile = [f"--hypothesis-profile={QUICK_PROFILE}"] if fast else []
    env = {"CI": "true", **(quick() if fast else {})}
    done = run_pytest(*args, *profile, "-k", selected, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b\d+ passed", done.stdout) and " skipped" not in done.stdout, done.stdout


@pytest.mark.parametrize("name", COSTLY)
def test_a_fuzz_campaign_finds_nothing(
    name: str, subjects: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["fuzz", str(subjects[name]), "--minutes", "0.05", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == faults.PASS, out
    assert out.rstrip().endswith("0 failures") and list(tmp_path.glob("*.json")) == []
