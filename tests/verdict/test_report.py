"""What a student reads on failure: check, spec symptom, likely bug, workload, trace table."""

from __future__ import annotations

from pathlib import Path

from schedcheck.drive.loader import load_impl
from schedcheck.verdict.verify import verify
from tests.workloads import EXAMPLES

MUTANTS = Path(__file__).resolve().parents[1] / "mutants"


def test_report_of_output_cleared_on_preemption() -> None:
    impl = load_impl(MUTANTS / "bt_output_cleared_on_preemption.py")
    report = verify(impl, EXAMPLES["example2"]).report()
    first, *rest = report.splitlines()
    assert first.startswith("I4 at step 2, schedule(): a2 was preempted and its output went")
    assert "  spec's symptom: output differs from the run without preemption" in report
    assert "  likely bug: output cleared on preemption" in report
    assert "requests: a2 (prompt 3, max 2, step 1), a1 (prompt 2, max 3, step 1)" not in report
    assert "requests: a1 (prompt 2, max 3, step 1), a2 (prompt 3, max 2, step 1)" in report
    table = [line for line in rest if line.startswith("| ")]
    assert table[0] == "| step | call | returned | a2 | a1 | blocks_used | waiting | finished |"
    assert [row.split(" | ")[:2] for row in table[1:]] == [
        ["| 1", "schedule()"],
        ["| 1", "update()"],
        ["| 2", "schedule()"],
    ]
    assert "| 2 | schedule() | {a1: 1} | W 0/3/0 [] | R 2/3/2 [" in report


def test_reference_verdict_is_ok() -> None:
    verdict = verify(load_impl(), EXAMPLES["example4"], lockstep=True)
    assert verdict.ok and verdict.report() == "all checks hold"


def test_a_long_run_s_table_shows_the_sequences_its_last_steps_run() -> None:
    """Past MAX_SEQ_COLUMNS sequences, the columns are those the rows shown schedule (a long
    run's last steps are about its latest requests); fewer keep arrival order."""
    from schedcheck.drive.driver import run
    from schedcheck.model.workload import Config, Request, Workload
    from schedcheck.verdict.report import MAX_SEQ_COLUMNS, trace_table

    requests = tuple(Request(f"r{k}", 1, 2, 1 + 20 * k) for k in range(MAX_SEQ_COLUMNS + 4))
    trace = run(load_impl(), Workload(Config(4, 2, 2, 4), requests))
    last = trace.steps[-1].number
    header = trace_table(trace, last).splitlines()[0]
    late = requests[-1].seq_id
    assert f"| returned | {late} |" in header, header
    few = run(load_impl(), Workload(Config(4, 2, 2, 4), requests[:3]))
    assert "| returned | r0 | r1 | r2 |" in trace_table(few, few.steps[-1].number).splitlines()[0]
