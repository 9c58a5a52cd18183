"""`schedcheck grade`: right verdicts for a mixed class, the three files, and the same
report whether graded at once or in shards merged later (so: deterministic)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from schedcheck.cli.main import main
from schedcheck.drive.isolated import Isolated
from schedcheck.grading.grade import GROUP_OF, GROUPS, HUNG_RUNS, grade_one
from schedcheck.grading.report import Entry, Failure, GroupState, Report, Verdict
from schedcheck.sandbox.process import Limits
from schedcheck.strategies.coverage import LABELS
from schedcheck.strategies.examples import EXAMPLES
from tests.catalogue import inline_reference, standalone
from tests.helpers import ROOT

CLASS = {  # student -> (file, expected verdict)
    "alice": (ROOT / "tests" / "equivalents" / "one_pass.py", "pass"),
    # a bug the spec's examples show, and whose failing groups are shrunk in seconds (a
    # student's grading is no faster or slower for it: the class is about the verdicts)
    "bob": (ROOT / "tests" / "mutants" / "bt_for_loop_over_running.py", "fail"),
    "carol": (ROOT / "tests" / "mutants" / "eos_zero_ignored.py", "fail"),
    "dave": (ROOT / "tests" / "hostile" / "os_exit.py", "fail"),
    "erin": (ROOT / "tests" / "hostile" / "import_error.py", "fail"),
    "frank": (ROOT / "tests" / "hostile" / "sleep_forever.py", "fail"),
}
FLAGS = ["--sample", "20", "--call-timeout", "0.5", "-j", "2"]


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One folder per student, graded at once: (the folder, the grading's output)."""
    root = tmp_path_factory.mktemp("grading")
    folder = root / "class"
    for student, (source, _) in CLASS.items():
        (folder / student).mkdir(parents=True)
        shutil.copy(standalone(source), folder / student / "p07_scheduler.py")
    whole = root / "whole"
    assert main(["grade", str(folder), "--out", str(whole), *FLAGS]) == 0
    return folder, whole


@pytest.mark.heavy
def test_verdicts(graded: tuple[Path, Path]) -> None:
    report = json.loads((graded[1] / "report.json").read_text())
    verdicts = {Path(e["path"]).parent.name: e["verdict"] for e in report["submissions"]}
    assert verdicts == {student: verdict for student, (_, verdict) in CLASS.items()}
    by_student = {Path(e["path"]).parent.name: e for e in report["submissions"]}
    assert all(state == "pass" for state in by_student["alice"]["checks"].values())
    assert by_student["bob"]["checks"]["examples"] == "fail"  # I6 in the spec's examples
    assert by_student["bob"]["failures"][0]["check"] == "I6"
    assert all(f["workload"] for f in by_student["bob"]["failures"])
    assert by_student["erin"]["checks"]["contract"] == "fail"
    assert "could not be loaded" in by_student["erin"]["failures"][0]["message"]
    assert by_student["frank"]["checks"]["contract"] == "fail"


@pytest.mark.costly  # 30 s: a grading of 50 workloads and its shrinking
def test_the_sample_reaches_a_bug_the_examples_show_too() -> None:
    """A queue jumper fails the spec's example 3, and the random sample finds it by itself
    as well: its fcfs group fails on a workload of the sample (the first 50)."""
    bob = standalone(ROOT / "tests" / "mutants" / "bt_phase2_continue.py")
    entry = grade_one(str(bob), Limits(call_timeout=0.5), budget=300.0, size=50)
    assert entry.checks["examples"] is GroupState.FAIL, entry
    assert entry.checks["fcfs"] is GroupState.FAIL, entry


@pytest.mark.heavy
def test_the_three_files_and_a_page_per_failure(graded: tuple[Path, Path]) -> None:
    whole = graded[1]
    report = json.loads((whole / "report.json").read_text())
    for entry in report["submissions"]:
        has_workload = any(f.get("workload") for f in entry["failures"])
        assert ("page" in entry) == has_workload, entry["path"]
        if has_workload:
            assert (whole / entry["page"]).read_text().startswith("<!DOCTYPE html>")
    suites = ET.parse(whole / "junit.xml").getroot()
    assert len(suites.findall("testsuite")) == len(CLASS)
    assert len(suites.findall("testsuite/testcase")) == len(CLASS) * 15
    summary = (whole / "summary.md").read_text().splitlines()
    assert summary[0].startswith("| submission | verdict |")
    rows = [line for line in summary[2:] if line.startswith(("| /", "| \\"))]
    assert len(rows) == len(CLASS) and summary[2 + len(CLASS)] == ""
    # What the verdicts rest on: the runs, and every hard part with its count.
    alice = next(line for line in rows if "/alice/" in line)
    assert (
        " of " in alice.split("|")[6]
        and alice.split("|")[7].strip() == f"{len(LABELS)} of {len(LABELS)}"
    )
    assert [line.split("|")[1].strip() for line in summary[-len(LABELS) :]] == list(LABELS)


@pytest.mark.costly  # two more gradings of the class (40 s)
def test_shards_merged_equal_one_grading(graded: tuple[Path, Path], tmp_path: Path) -> None:
    folder, whole = graded
    shards = [tmp_path / "shard1", tmp_path / "shard2"]
    for k, out in enumerate(shards, start=1):
        assert main(["grade", str(folder), "--out", str(out), "--shard", f"{k}/2", *FLAGS]) == 0
    merged = tmp_path / "merged"
    assert main(["grade", "--merge", *map(str, shards), "--out", str(merged)]) == 0
    pages = sorted(p.relative_to(whole) for p in (whole / "pages").glob("*.html"))
    assert pages and pages == sorted(p.relative_to(merged) for p in (merged / "pages").glob("*"))
    for name in ("report.json", "junit.xml", "summary.md", *map(str, pages)):
        assert (whole / name).read_text() == (merged / name).read_text(), name


def test_grading_nothing_that_exists_is_a_usage_error(tmp_path: Path) -> None:
    assert main(["grade", str(tmp_path / "nobody"), "--out", str(tmp_path / "out")]) == 2


@pytest.mark.heavy
def test_a_submission_that_hangs_is_graded_on_its_first_hangs() -> None:
    """Issue 54: each hang costs a wait; grade tries no more runs once five have hung. What
    failed did fail: a verdict (fail), the groups not reached 'not run', never `error`
    (a Gradescope student would get no score for a bug of their own); and the hang it
    reports hung for the whole call timeout, at the line it names."""
    hangs = standalone(ROOT / "tests" / "mutants" / "infinite_loop_full_house.py")
    entry = grade_one(str(hangs), Limits(call_timeout=0.3), budget=60, size=200)
    assert entry.verdict is Verdict.FAIL, entry.failures
    assert entry.checks["contract"] is GroupState.FAIL
    assert GroupState.NOT_RUN in entry.checks.values()
    assert f"after {HUNG_RUNS} of them hung" in entry.failures[-1].message
    hang = next(f for f in entry.failures if f.check == "C1")
    assert "within 0.3 s" in hang.message and "in _schedule_waiting" in hang.message, hang
    assert entry.sample is not None and entry.sample.runs < entry.sample.of


# Fails I8 at once, and burns a few milliseconds of CPU at every call: a budget of seconds
# runs out long before its runs do.
BURNS = """
import time

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _may_admit(self, budget):
        return bool(self.waiting) and budget > 0  # no max_num_seqs: I8

    def schedule(self):
        end = time.process_time() + 0.005
        while time.process_time() < end:
            pass
        return super().schedule()
"""


@pytest.mark.heavy
def test_a_submission_over_the_budget_fails_on_what_it_showed(tmp_path: Path) -> None:
    path = tmp_path / "p07_scheduler.py"
    path.write_text(inline_reference(BURNS))
    entry = grade_one(str(path), Limits(), budget=4, size=200)
    assert entry.verdict is Verdict.FAIL, entry.failures
    assert entry.checks["I8"] is GroupState.FAIL, entry.checks
    assert GroupState.NOT_RUN in entry.checks.values()
    assert "budget" in entry.failures[-1].message


def test_a_correct_submission_over_the_budget_is_our_error() -> None:
    """No failure seen, the sample not finished: nothing to judge on, so no verdict."""
    entry = grade_one(
        str(standalone(ROOT / "tests" / "equivalents" / "one_pass.py")), Limits(), budget=0, size=20
    )
    assert entry.verdict is Verdict.ERROR, entry


@pytest.mark.costly  # 20 s; the hunt of sorts_by_seq_id rotates through the default run
def test_code_that_sorts_by_seq_id_fails_the_sample() -> None:
    """Issue 27: with every request named a1, a2, ... in arrival order, update() walking its
    record sorted by seq_id was graded pass on every group. The sample's names sort
    otherwise now."""
    sorts = standalone(ROOT / "tests" / "mutants" / "sorts_by_seq_id.py")
    entry = grade_one(str(sorts), Limits(), budget=60, size=60)
    assert entry.verdict is Verdict.FAIL, entry.checks
    assert {f.check for f in entry.failures} & {"A1", "R1"}, entry.failures


@pytest.mark.heavy
def test_report_json_reads_back_as_it_was_written(graded: tuple[Path, Path]) -> None:
    """Merging reads each shard's report.json into types and writes it again: nothing may
    be lost or changed on the way, for any entry (pass, fail, a contract failure)."""
    for out in graded[1:]:
        data = json.loads((out / "report.json").read_text())
        report = Report.from_dict(data)
        assert report.to_dict() == data
        assert Report.from_dict(report.to_dict()) == report
        assert {e.verdict for e in report.submissions} == {Verdict.PASS, Verdict.FAIL}


def test_an_entry_is_written_in_the_documented_shape() -> None:
    """docs/grading.md's report.json entry, key for key: `requests` and `steps` only with a
    workload, `isolation` and `page` only when known, the page's HTML never."""
    workload = EXAMPLES[next(iter(EXAMPLES))]
    checks = dict.fromkeys(GROUPS, GroupState.PASS) | {
        "examples": GroupState.FAIL,
        "fcfs": GroupState.FAIL,
        "lockstep": GroupState.NOT_RUN,
    }
    shrunk = Failure("F1", "F1 at step 2, schedule(): ...", workload, steps=4)
    entry = Entry(
        "/class/bob/p07_scheduler.py",
        Verdict.FAIL,
        checks,
        (shrunk, Failure("", "grading stopped at its 300 s budget")),
        isolation="process",
        page="pages/bob_p07_scheduler_py-0123abcd.html",
        page_html="<!DOCTYPE html>",
    )
    states = {group: "pass" for group in GROUPS}
    assert entry.to_dict() == {
        "path": "/class/bob/p07_scheduler.py",
        "verdict": "fail",
        "checks": states | {"examples": "fail", "fcfs": "fail", "lockstep": "not run"},
        "failures": [
            {
                "check": "F1",
                "message": "F1 at step 2, schedule(): ...",
                "workload": json.loads(workload.to_json()),
                "requests": len(workload.requests),
                "steps": 4,
            },
            {"check": "", "message": "grading stopped at its 300 s budget", "workload": None},
        ],
        "isolation": "process",
        "page": "pages/bob_p07_scheduler_py-0123abcd.html",
    }
    read = Entry.from_dict(entry.to_dict())
    assert read.failures[0].workload == workload and read.page_html is None
    broke = Entry("/class/x.py", Verdict.ERROR, {}, (Failure("", "RuntimeError()"),))
    assert broke.to_dict() == {
        "path": "/class/x.py",
        "verdict": "error",
        "checks": {},
        "failures": [{"check": "", "message": "RuntimeError()", "workload": None}],
    }


def test_the_budget_counts_the_submissions_cpu_and_its_hangs_not_the_clock() -> None:
    """A hung call is charged its timeout whether it spun or slept; a correct run is
    charged the CPU its worker used, which a busy machine does not change."""
    sleeps = standalone(ROOT / "tests" / "hostile" / "sleep_forever.py")
    worker = Isolated(sleeps, Limits(call_timeout=0.3))
    try:
        worker.run(EXAMPLES["example1"])
        assert 0.3 <= worker.used() < 0.3 + 5.0  # the hang, and the worker's start-up CPU
    finally:
        worker.stop()
    correct = Isolated(standalone(ROOT / "tests" / "equivalents" / "one_pass.py"))
    try:
        before = correct.used()
        started = time.monotonic()
        time.sleep(0.5)  # the clock moves; the worker, waiting, uses nothing
        correct.run(EXAMPLES["example1"])
        assert correct.used() - before < 0.25 < time.monotonic() - started
    finally:
        correct.stop()


@pytest.mark.costly
def test_a_starved_machine_gets_the_verdict_an_idle_one_gives() -> None:
    """Issue 37: with a wall-time budget, CPU burners beside the grading turned a hanging
    submission's `fail` into `error` (the budget ran out before its first hang was told).
    The budget counts what the submission used: the same verdict under load."""
    hangs = standalone(ROOT / "tests" / "mutants" / "infinite_loop_full_house.py")
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(2 * (os.cpu_count() or 1))
    ]
    try:
        entry = grade_one(str(hangs), Limits(call_timeout=0.3), budget=4, size=200)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert entry.verdict is Verdict.FAIL, entry.failures
    assert entry.checks["contract"] is GroupState.FAIL


@pytest.mark.costly  # 15 s
def test_a_bug_of_size_fails_on_the_larger_sample_unshrunk() -> None:
    """Issue 38: a history capped at 64 shows only past 64 finished requests, which only
    the larger workloads reach; its group fails with the sampled workload, reported as it
    was (no search of ordinary workloads would find one)."""
    capped = standalone(ROOT / "tests" / "mutants" / "finished_history_capped.py")
    entry = grade_one(str(capped), Limits(), budget=300.0, size=20)
    assert entry.verdict is Verdict.FAIL and entry.checks["I6"] is GroupState.FAIL, entry
    found = next(f for f in entry.failures if f.check == "I6")
    assert found.workload is not None and len(found.workload.requests) > 64


@pytest.mark.heavy
def test_grade_fails_a_scheduler_that_ignores_max_num_seqs() -> None:
    """Issue 56: the catalogue's max_num_seqs_ignored got `pass` on every group from
    grade's old sample while check failed it by I8 at step 1. grade now makes every run
    check's stages make, so whatever check fails, grade fails."""
    path = standalone(ROOT / "tests" / "mutants" / "max_num_seqs_ignored.py")
    entry = grade_one(str(path), Limits(), budget=300.0)
    assert entry.verdict is Verdict.FAIL, entry
    assert entry.checks["I8"] is GroupState.FAIL, entry.checks
    found = next(f for f in entry.failures if f.check == "I8")
    assert found.workload is not None and len(found.workload.requests) <= 3, found
    assert entry.sample is not None and entry.sample.runs == entry.sample.of > 1000


@pytest.mark.heavy
def test_a_mutable_default_output_list_fails_and_is_never_our_error() -> None:
    """Issue 56: `Sequence(..., output=[])` (one list shared by every sequence) got
    `error` from grade (an IndexError of ours in shrinking) where check fails it."""
    path = standalone(ROOT / "tests" / "mutants" / "output_default_shared.py")
    entry = grade_one(str(path), Limits(), budget=120.0, size=20)
    assert entry.verdict is Verdict.FAIL, entry
    assert entry.checks["examples"] is GroupState.FAIL, entry.checks


# One scheduler of the worker's life breaks the contract (a run's, or its twin's for D1);
# the runs before and after it do not: a failure the search for its group cannot make again.
FAILS_ONCE = """
from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]

MADE = [0]


class Scheduler(_Reference):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        MADE[0] += 1
        if MADE[0] == 40:
            self.waiting = None
"""


def test_a_failure_that_does_not_recur_is_reported_as_it_was_seen(tmp_path: Path) -> None:
    path = tmp_path / "p07_scheduler.py"
    path.write_text(inline_reference(FAILS_ONCE))
    entry = grade_one(str(path), Limits(), budget=120.0, size=20)
    assert entry.verdict is Verdict.FAIL, entry
    seen = next(f for f in entry.failures if "did not fail again" in f.message)
    assert "'NoneType' object" in seen.message and seen.workload is not None, seen
    assert entry.checks[GROUP_OF[seen.check]] is GroupState.FAIL, entry.checks


@pytest.mark.heavy
def test_grade_fails_state_two_schedulers_share() -> None:
    """Issue 47: a block size kept in a module global is right for one scheduler at a time
    and wrong for two; grade makes check's runs of two schedulers alive at once, and its
    counterexample names both workloads (report.json's `other`)."""
    path = standalone(ROOT / "tests" / "mutants" / "block_size_module_global.py")
    entry = grade_one(str(path), Limits(), budget=300.0)
    assert entry.verdict is Verdict.FAIL, entry
    pair = next(f for f in entry.failures if f.other is not None)
    assert "two alive at once" in pair.message and pair.workload is not None, pair
    assert pair.workload.config != pair.other.config
    data = pair.to_dict()
    assert Failure.from_dict(data) == pair and "other" in data
