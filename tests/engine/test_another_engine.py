"""Adding an engine is a folder and a line (issue 34): the toy engine of tests/engine_subjects/
toy/, of a shape of its own (jobs, pages, a plan and a commit), is registered here with its
adapter and driven by `schedcheck engine --engine toy` with no change to schedcheck's core:
the correct one passes, in this process and in its box, and each of its two mutants is
caught by the check it names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from schedcheck import faults
from schedcheck.cli.main import main
from schedcheck.engine import registry
from tests.engine_subjects.toy.adapter import ADAPTER
from tests.helpers import ROOT, rotation_day

TOY = ROOT / "tests" / "engine_subjects" / "toy"
MUTANTS = {"resume_keeps_progress": "E2", "finish_keeps_refs": "E3"}


@pytest.fixture
def toy() -> Iterator[None]:
    registry.register("toy", ADAPTER)
    yield
    registry.unregister("toy")


def test_the_correct_toy_passes_in_its_box(toy: None, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["engine", "--engine", "toy", str(TOY / "engine.py"), "--examples", "300"])
    out = capsys.readouterr().out
    assert code == faults.PASS, out
    assert "isolation: " in out and "isolation: none" not in out
    reached = out.split("reached: ")[1]
    assert "preemption (" in reached and "never reached: preemption" not in out


# One mutant a day in the default run, both with -m costly.
TODAY = sorted(MUTANTS)[rotation_day() % len(MUTANTS)]


@pytest.mark.parametrize(
    "mutant",
    [pytest.param(m, marks=() if m == TODAY else pytest.mark.costly) for m in sorted(MUTANTS)],
)
def test_each_mutant_of_the_toy_is_caught_by_its_check(
    toy: None, mutant: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = TOY / "mutants" / f"{mutant}.py"
    saved = tmp_path / "saved"
    argv = ["engine", "--engine", "toy", str(path), "--in-process", "--save-failures", str(saved)]
    assert main(argv) == faults.FAIL
    out = capsys.readouterr().out
    assert f"FAIL {path}: {MUTANTS[mutant]}" in out, out
    assert "--engine toy" in out.split("to re-run exactly this workload:")[1]


def test_an_adapter_named_by_its_module_needs_no_registration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    where = "tests.engine_subjects.toy.adapter:ADAPTER"
    argv = ["engine", "--engine", where, str(TOY / "engine.py"), "--in-process"]
    assert main([*argv, "--examples", "50"]) == faults.PASS
    assert "PASS " in capsys.readouterr().out
