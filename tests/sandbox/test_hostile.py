"""Hostile submissions are reported as failures, fast, and leave the checker and the
project untouched. These check the isolation itself and do not depend on `--impl`."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schedcheck.drive.isolated import Isolated
from schedcheck.faults import SubmissionError
from schedcheck.sandbox import uids
from schedcheck.sandbox.beat import Board, board_fd
from schedcheck.sandbox.process import Limits, proc_stat
from schedcheck.verdict.verify import verify
from tests.catalogue import standalone
from tests.workloads import EXAMPLES

HOSTILE = Path(__file__).resolve().parents[1] / "hostile"
ROOT_EQUIVALENT = Path(__file__).resolve().parents[1] / "equivalents" / "one_pass.py"
PROJECT = Path(__file__).resolve().parents[2]


def hostile(name: str) -> Path:
    """The hostile file `name`, standalone as a box loads it (tests/catalogue.py)."""
    return standalone(HOSTILE / f"{name}.py")


FAST = Limits(call_timeout=1.0, memory=256 << 20)
WORKLOAD = EXAMPLES["example2"]  # two requests, a preemption, four steps

# hostile file -> what the first violation's message must contain
EXPECTED = {
    "infinite_loop": "schedule() did not return within 1 s at step 2",
    "sleep_forever": "update() did not return within 1 s at step 1",
    "sigalrm_ignored": "schedule() did not return within 1 s at step 1",
    "sys_exit": "raised SystemExit: 0",
    "os_exit": "the worker process exited with code 0",
    "segfault": "the worker process was killed by signal SIGSEGV during schedule() at step 1",
    "memory_hog": "raised MemoryError",
    "output_flood": "raised RuntimeError: flooded",
    "wrong_types": "schedule() must return a dict, got list",
    "lying_dict": "schedule() must return a dict, got Always",
    "patch_checker": "",  # anything: the point is that it fails
    "writes_files": "",
    "reads_secrets": "raised RuntimeError: stolen: None",
    "spins_a_thread": "left 1 thread(s) running after the run ended",
    "forges_heartbeats": "the submission writes the checker's own page",
}


def check_hostile(name: str) -> tuple[str, str, float]:
    """(first violation, captured output, seconds) of one hostile file on WORKLOAD."""
    worker = Isolated(hostile(name), FAST)
    start = time.monotonic()
    try:
        verdict = verify(worker, WORKLOAD)
    finally:
        worker.stop()
    assert not verdict.ok, f"{name} passed"
    return str(verdict.violations[0]), verdict.output, time.monotonic() - start


# Attacks on classmates and the machine, graded in a class: tests/sandbox/test_box.py.
BOX_THREATS = {"kills_everyone", "detaches_a_child", "fork_bomb"}


def test_every_hostile_file_has_an_expectation() -> None:
    tampering = {p.stem for p in HOSTILE.glob("tamper_*.py")}  # tests/sandbox/test_tampering.py
    assert {p.stem for p in HOSTILE.glob("*.py")} - tampering == {
        *EXPECTED,
        "import_error",
        *BOX_THREATS,
    }


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hostile_submission_is_a_failure(name: str) -> None:
    first, _, seconds = check_hostile(name)
    assert EXPECTED[name] in first
    assert seconds < 30


def test_import_error_is_one_clear_message() -> None:
    with pytest.raises(SubmissionError) as raised:
        Isolated(HOSTILE / "import_error.py", FAST).start()
    message = str(raised.value)
    assert message.startswith("the submission could not be loaded: raised ModuleNotFoundError")
    assert "numpy_is_not_here" in message and "line 3" in message


def test_output_is_captured_and_cut(capfd: pytest.CaptureFixture[str]) -> None:
    _, output, _ = check_hostile("output_flood")
    assert output.startswith("x" * 100) or output.startswith("y" * 100)
    assert len(output) < 5000 and "more bytes not shown" in output
    seen = capfd.readouterr()
    assert "xxxxxxxxxx" not in seen.out + seen.err


def test_the_checkers_environment_stays_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEDCHECK_REDIS_URL", "redis://:hunter2@db.example.org:6379/0")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_hunter3")
    first, output, _ = check_hostile("reads_secrets")
    assert "stolen: None" in first
    assert "PYTHONPATH" in output  # it did print its environment
    assert "hunter" not in first + output


def test_nothing_lands_in_the_project() -> None:
    """Where writes_files.py writes, and only there: the whole checkout's listing also
    saw the cache files other test workers wrote meanwhile (issue 37)."""
    targets = [PROJECT / "PWNED.txt", PROJECT / "scheduler" / "x.py", PROJECT / "scratch.txt"]
    assert not any(p.exists() for p in targets)
    check_hostile("writes_files")
    assert [p for p in targets if p.exists()] == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the privilege drop happens only as root")
def test_worker_runs_as_a_uid_of_its_own(tmp_path: Path) -> None:
    spy = tmp_path / "p07_scheduler.py"
    spy.write_text(
        "import os\n"
        "print('uid', os.getuid(), 'cwd', os.getcwd(), flush=True)\n"
        "raise SystemExit('stop here')\n"
    )
    worker = Isolated(spy, FAST)
    with pytest.raises(SubmissionError):
        worker.start()
    assert worker._out is not None
    printed = worker._out.take()
    uid = int(printed.split()[1])
    assert uids.BASE <= uid < uids.BASE + uids.SPAN, printed
    assert "cwd /tmp" in printed
    assert uids.processes_of(uid) == []  # gone, and the uid swept


def test_a_dead_worker_is_replaced_for_the_next_workload() -> None:
    worker = Isolated(hostile("os_exit"), FAST)
    try:
        first = worker.run(WORKLOAD)
        second = worker.run(WORKLOAD)
    finally:
        worker.stop()
    assert first.failure is not None and second.failure is not None
    assert first.failure.message == second.failure.message


@pytest.mark.parametrize("name", ["import_error", "os_exit", "sleep_forever"])
def test_schedcheck_check_exits_1(name: str) -> None:
    start = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "schedcheck",
            "check",
            str(hostile(name)),
            "--call-timeout=1",
            "-n",
            "1",
        ],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CI": "true"},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"FAIL {hostile(name)}" in done.stdout
    assert time.monotonic() - start < 60


def test_a_hung_worker_dies_with_its_parent() -> None:
    """A submission stuck in a loop never reads its socket: the kernel must kill it when
    the checker that started it dies (PR_SET_PDEATHSIG)."""
    script = (
        "import json, sys, time\n"
        "from schedcheck.drive.isolated import Isolated\n"
        "from tests.workloads import EXAMPLES\n"
        f"worker = Isolated({str(hostile('infinite_loop'))!r})\n"
        "worker.start()\n"
        "print(worker.proc.pid, flush=True)\n"
        "worker._send(100, op='run', workload=json.loads(EXAMPLES['example2'].to_json()))\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], cwd=PROJECT, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    time.sleep(0.5)  # the worker is spinning in schedule() now
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists(), "the worker outlived its parent"


def test_a_call_starved_of_cpu_is_not_a_hung_call() -> None:
    """The timeout excuses a worker that is runnable but barely ran (a busy machine), never
    one that spins (it uses the CPU it gets) or sleeps (it is not runnable)."""
    spinning = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    sleeping = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.6)  # the spinner has used about 0.6 s of CPU now
        worker = Isolated(HOSTILE / "infinite_loop.py", Limits(call_timeout=0.2))
        worker.call_started = time.monotonic()
        for proc, cpu_at_call, starved in ((spinning, None, False), (sleeping, 0.0, False)):
            worker.proc, worker.call_cpu = proc, cpu_at_call  # type: ignore[assignment]
            assert worker._starved() is starved
        worker.proc = spinning  # type: ignore[assignment]
        worker.call_cpu = 0.0  # the call began when the spinner started: it used 0.6 s
        assert not worker._starved()
        fields = proc_stat(spinning.pid)
        worker.call_cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        assert worker._starved()  # as if the call began just now: it has used nothing yet
        worker.call_started -= 11 * 0.2  # ... but not past STARVED_CAP timeouts of wall time
        assert not worker._starved()
    finally:
        for proc in (spinning, sleeping):
            proc.kill()
            proc.wait()


def test_a_beat_being_written_when_the_page_is_read_is_a_call_beginning() -> None:
    """A worker that lost its core in mid-beat leaves the page torn (odd counter) for as long
    as it waits: seen in CI, a correct marathon (50,000 beats a second) read once at the
    deadline, torn, was a hung call. A torn read is a call beginning now; one kept torn (a
    submission writing the page) gains a single timeout, then the CPU it burns tells."""
    spinning = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    worker = Isolated(HOSTILE / "infinite_loop.py", Limits(call_timeout=0.2))
    worker.board = Board(board_fd())
    try:
        time.sleep(0.6)  # the spinner has used about 0.6 s of CPU now
        worker.proc = spinning  # type: ignore[assignment]
        worker.call_started, worker.call_cpu = time.monotonic() - 1, 0.0  # long past due
        assert worker._left() < 0 and not worker._starved()  # read whole: a hang
        struct.pack_into("<Q", worker.board.page, 0, 7)  # a beat in mid-write
        worker._sync()
        assert worker._left() > 0.1  # a call beginning: its own timeout from now
        assert worker.call_cpu is not None
        began, deadline = worker.call_cpu, time.monotonic() + 5
        # the spinner burns more than half the timeout meanwhile (however busy the machine)
        while time.monotonic() < deadline and (
            worker._left() > 0 or (worker._worker_cpu() or 0) - began < 0.15
        ):
            time.sleep(0.05)
        worker._sync()  # still torn: no second timeout
        assert worker._left() < 0 and not worker._starved()
        worker.board.write(3, "update()", time.monotonic(), 0.0)  # the page whole again
        worker._sync()
        assert worker.where == (3, "update()") and worker._left() > 0.15
    finally:
        spinning.kill()
        spinning.wait()
        worker.board.close()


def test_a_worker_that_used_half_its_cpu_limit_is_replaced() -> None:
    """RLIMIT_CPU stops a runaway thread; a long, correct run never meets it: the worker is
    replaced, between two workloads, once it has used half."""
    worker = Isolated(standalone(ROOT_EQUIVALENT), Limits(cpu=2))
    try:
        worker.run(WORKLOAD)
        first = worker.proc
        assert first is not None
        worker.call_cpu = 1.5  # as if its last heartbeat said so
        trace = worker.run(WORKLOAD)
        assert trace.failure is None and worker.proc is not first
    finally:
        worker.stop()
