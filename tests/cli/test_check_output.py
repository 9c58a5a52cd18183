"""What `schedcheck check` prints (issue 17): a line per stage, one report in schedcheck's
own words, the other failures by name, pytest's output only in the log (or with -v), and
plain text wherever the output is not a terminal or NO_COLOR is set."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from schedcheck import faults
from schedcheck.cli.check import report_failure
from schedcheck.cli.console import Console
from schedcheck.cli.main import main
from schedcheck.cli.stages import Outcome
from tests.catalogue import standalone
from tests.helpers import QUICK_PROFILE, ROOT, quick, run_pytest

MUTANT = standalone(ROOT / "tests" / "mutants" / "preempts_oldest.py")  # fails a worked example
MACHINERY = ("E   ", "Traceback", "hypothesis", "Falsifying", "pytest", "____", "::")


def outcome(name: str, checks: list[str], step: int, report: str) -> Outcome:
    return Outcome(
        f"schedcheck/suite/test_properties.py::{name}", "failed", checks, report, (step, 1, 5)
    )


def test_the_earliest_failure_is_reported_and_the_others_named(tmp_path: Path) -> None:
    stream = io.StringIO()
    failed = [
        outcome("test_differential", ["D1"], 4, "D1 at step 4: outputs differ"),
        outcome("test_invariants", ["I3"], 2, "I3 at step 2: a budget broken"),
        outcome("test_lockstep", ["R1"], 3, "R1 at step 3: not the reference's step"),
    ]
    report_failure(Console(stream), Path("mine.py"), failed, tmp_path, tmp_path / "x.log")
    out = stream.getvalue()
    assert "I3 at step 2: a budget broken" in out
    assert "D1 at step 4" not in out and "R1 at step 3" not in out  # one report only
    assert "2 other properties also failed: test_differential (D1), test_lockstep (R1)" in out
    assert re.search(r"^FAIL mine\.py: I3, D1, R1$", out, re.M), out  # the reported one first
    assert f"full log: {tmp_path / 'x.log'}" in out


def test_a_failing_check_reads_without_pytest_machinery(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(MUTANT), "-n", "0"]) == faults.FAIL
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("isolation: ")
    assert re.match(r"contract +ok$", lines[1]) and re.match(r"worked examples +FAIL ", lines[2])
    assert re.match(r"properties +skipped +an earlier stage failed$", lines[3])
    assert "F1 at step 2, schedule()" in out and "likely bug:" in out and "workload:" in out
    assert not any(sign in out for sign in MACHINERY), out
    assert "\x1b" not in out  # not a terminal: plain text
    log = Path(re.findall(r"^full log: (.+)$", out, re.M)[-1])
    assert "CheckFailed" in log.read_text()  # pytest's own account is kept there


def test_a_later_stage_gives_way_as_soon_as_an_earlier_one_fails(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The three stages share one pytest session on two workers; the stateful test starts
    # while the properties still run, and is skipped once one of them has found the bug.
    # (At the quick profile: what is tested is the giving way, not the search.)
    mutant = standalone(ROOT / "tests" / "mutants" / "sorts_by_seq_id.py")
    quick(monkeypatch)
    assert main(["check", str(mutant), "-n", "2", "--profile", QUICK_PROFILE]) == faults.FAIL
    out = capsys.readouterr().out
    assert re.search(r"^worked examples +ok ", out, re.M), out
    assert re.search(r"^properties +FAIL ", out, re.M), out
    assert re.search(r"^stateful +skipped +an earlier stage failed$", out, re.M), out
    assert re.search(r"^FAIL .*sorts_by_seq_id\.py: (A1|R1)", out, re.M), out


def test_the_worked_examples_stop_at_their_first_failure(tmp_path: Path) -> None:
    log = tmp_path / "outcomes.jsonl"
    env = {
        "SCHEDCHECK_OUTCOMES": str(log),
        "SCHEDCHECK_FOUND": str(tmp_path / "found"),
        "SCHEDCHECK_STAGES": "test_seed_examples.py! test_properties.py",
    }
    suite = ("schedcheck/suite/test_seed_examples.py", "schedcheck/suite/test_properties.py")
    done = run_pytest(*suite, "-n", "0", "-p", "schedcheck.plugin", "--impl", str(MUTANT), env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    failed = [o["test"] for o in lines if o["outcome"] == "failed"]
    skipped = {o["why"] for o in lines if o["outcome"] == "skipped"}
    assert len(failed) == 1, failed  # serially: the first failure, then nothing else runs
    assert "Skipped: another worked example failed" in skipped, skipped
    assert "Skipped: an earlier stage failed" in skipped, skipped
    assert not any(o["outcome"] == "passed" and "properties" in o["file"] for o in lines)


def test_verbose_shows_pytests_output(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(MUTANT), "-n", "0", "-v"]) == faults.FAIL
    out = capfd.readouterr().out
    assert "short test summary info" in out and "FAIL " in out


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_and_the_live_line_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    tty = Terminal()
    console = Console(tty)
    console.progress("properties: 12 examples")
    console.stage("properties", "FAIL", "1 of 3 failed")
    assert "\r\x1b[Kproperties: 12 examples" in tty.getvalue()
    assert "\x1b[31mFAIL\x1b[0m" in tty.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    plain = Terminal()
    Console(plain).stage("properties", "FAIL")
    assert "\x1b[31m" not in plain.getvalue()
    pipe = io.StringIO()
    Console(pipe).progress("properties: 12 examples")
    assert pipe.getvalue() == ""
