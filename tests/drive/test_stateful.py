"""The stateful test plays each run as one script (schedcheck/drive/driver.py's `play`): the
same calls, the same trace, in one command to the worker; and it still finds what only a
stateful run can show."""

from __future__ import annotations

from dataclasses import replace

from schedcheck.drive.driver import play, run
from schedcheck.drive.impl import open_impl
from schedcheck.drive.isolated import reference_copy
from schedcheck.drive.loader import load_impl
from schedcheck.invariants.checks import check_trace
from schedcheck.model.tokens import TokenModel
from schedcheck.model.workload import Config, Request, Workload
from schedcheck.sandbox.process import Limits
from tests.catalogue import standalone
from tests.helpers import ROOT, run_pytest

CONFIG = Config(num_blocks=3, block_size=4, max_num_seqs=4, max_num_batched_tokens=16)
MODEL = TokenModel(seed=7)


def test_adding_everything_then_finishing_is_a_driver_run() -> None:
    requests = (Request("b", 8, 4, 1), Request("a", 5, 3, 1), Request("10", 3, 2, 1))
    workload = Workload(CONFIG, requests, MODEL)
    script = [["add", "b"], ["add", "a"], ["add", "10"], ["finish"]]
    played, driven = play(load_impl(), workload, script), run(load_impl(), workload)
    assert played == driven and len(played.steps) > 3  # preemptions on 3 blocks
    assert not check_trace(played)


def test_a_script_places_each_call_where_it_says() -> None:
    requests = (Request("a1", 6, 3, 1), Request("a2", 4, 2, 3))
    workload = Workload(CONFIG, requests, MODEL)
    script = [["add", "a1"], ["step"], ["again"], ["step"], ["add", "a2"], ["step"], ["finish"]]
    trace = play(load_impl(), workload, script)
    first, second, third = trace.steps[:3]
    assert first.again is not None and first.again.finished == () and second.again is None
    assert (first.arrivals, second.arrivals, third.arrivals) == (("a1",), (), ("a2",))
    assert "a2" not in second.last().seqs and "a2" in third.scheduled.seqs
    assert all(s.status == "FINISHED" for s in trace.steps[-1].last().seqs.values())
    assert trace.failure is None and not check_trace(trace)


def test_a_worker_plays_it_as_this_process_does() -> None:
    requests = (Request("x", 7, 5, 1), Request("y", 4, 4, 2), Request("z", 7, 2, 2))
    workload = Workload(CONFIG, requests, MODEL)
    script = [["add", "x"], ["step"], ["add", "y"], ["add", "z"], ["step"], ["again"], ["finish"]]
    isolated = open_impl(reference_copy())
    try:
        remote = isolated.play(workload, script)
    finally:
        isolated.stop()
    assert remote == play(load_impl(), workload, script)


def test_a_call_that_hangs_mid_script_keeps_the_steps_before_it() -> None:
    # Step 1 fills two of three blocks, step 2's decode the third while b waits: the
    # mutant's phase 2 then waits forever for a free block.
    mutant = standalone(ROOT / "tests" / "mutants" / "infinite_loop_full_house.py")
    requests = (Request("a", 8, 4, 1), Request("b", 4, 2, 2))
    workload = Workload(CONFIG, requests, MODEL)
    isolated = open_impl(mutant, limits=Limits(call_timeout=0.5))
    try:
        trace = isolated.play(workload, [["add", "a"], ["step"], ["add", "b"], ["finish"]])
    finally:
        isolated.stop()
    assert trace.failure is not None
    assert (trace.failure.step, trace.failure.call) == (2, "schedule()"), trace.failure
    assert len(trace.steps) == 1 and trace.steps[0].update is not None
    found = check_trace(trace)
    assert [v.check for v in found][:1] == ["C1"]
    # The same script on the reference runs through: the hang is the mutant's.
    assert (
        play(
            load_impl(), replace(workload), [["add", "a"], ["step"], ["add", "b"], ["finish"]]
        ).failure
        is None
    )


def test_the_stateful_test_finds_a_bug_by_its_check() -> None:
    mutant = standalone(ROOT / "tests" / "mutants" / "max_tokens_off_by_one.py")
    test = "schedcheck/suite/test_state_machine.py"
    done = run_pytest(test, "-n", "0", "--impl", str(mutant))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "A1 at step" in done.stdout, done.stdout
