"""The `schedcheck` console script: exit codes, the contract check, --replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedcheck.cli.main import main
from tests.catalogue import standalone
from tests.helpers import ROOT
from tests.workloads import EXAMPLES

MUTANT = str(standalone(ROOT / "tests" / "mutants" / "bt_output_cleared_on_preemption.py"))
# The reference as a submission: one file, as a box can load it.
REFERENCE_FILE = str(standalone(ROOT / "tests" / "equivalents" / "one_pass.py"))


def test_help_prints_usage_and_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: schedcheck")


@pytest.mark.parametrize("argv", [[], ["grade"], ["check", "--bogus"]])
def test_usage_errors_exit_2(argv: list[str]) -> None:
    assert main(argv) == 2


def test_a_profile_no_one_registered_is_a_usage_error_not_ours(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """It was exit 3 (schedcheck's own fault) with a pytest log to read: the user named a
    profile that does not exist, which is theirs to fix (exit 2, the profiles named)."""
    assert main(["check", REFERENCE_FILE, "--profile", "nosuch"]) == 2
    err = capfd.readouterr().err
    assert "--hypothesis-profile nosuch: no Hypothesis profile of that name is registered" in err
    assert "schedcheck-grade" in err and "(--profile nosuch)" in err
    assert "schedcheck itself failed" not in err


def test_missing_default_submission_exits_2_and_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["check"]) == 2
    assert "no submission file at mine/p07_scheduler.py" in capsys.readouterr().err


def test_contract_problems_are_listed_in_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "p07_scheduler.py"
    broken.write_text(
        "import enum\n"
        "class SequenceStatus(enum.Enum):\n    WAITING = 1\n    RUNNING = 2\n"
        "class Sequence:\n"
        "    def __init__(self, seq_id, prompt_len, max_tokens):\n"
        "        self.seq_id, self.prompt_len, self.max_tokens = seq_id, prompt_len, max_tokens\n"
        "        self.output = []\n"
    )
    assert main(["check", str(broken)]) == 1
    out = capsys.readouterr().out
    assert "does not keep the contract" in out
    for problem in (
        "SequenceStatus has no member named FINISHED",
        "a new Sequence has no attribute num_computed",
        "a new Sequence has no attribute num_blocks",
        "Scheduler must be a class, got None",
    ):
        assert f"  - {problem}" in out


@pytest.mark.parametrize(("where", "code"), [(MUTANT, 1), (REFERENCE_FILE, 0)])
def test_replay_runs_one_saved_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, code: int
) -> None:
    saved = tmp_path / "example2.json"
    saved.write_text(EXAMPLES["example2"].to_json())
    assert main(["check", where, "--replay", str(saved)]) == code
    first, out = capsys.readouterr().out.split("\n", 1)
    assert first.startswith("isolation: ")  # the level in effect comes first
    assert out.startswith("FAIL" if code else "PASS")
    if code:
        assert "I4 at step 2, schedule(): a2 was preempted" in out


def test_unreadable_replay_file_is_a_usage_error(tmp_path: Path) -> None:
    saved = tmp_path / "broken.json"
    saved.write_text("{not json")
    assert main(["check", REFERENCE_FILE, "--replay", str(saved)]) == 2
