"""The parent's side of a sandboxed worker: start it, send it commands, never trust or wait
on it. It knows nothing of what the worker runs: the scheduler's runs (schedcheck/drive/
isolated.py) and an engine's (schedcheck/engine/isolated.py) are protocols over it.

Every wait has a deadline (the per-call timeout, from the moment the worker's heartbeat
board says a call into the submission began: schedcheck/sandbox/beat.py); a worker that dies,
hangs, or sends anything that is not a trace becomes an ordinary failure, and the next
workload gets a fresh worker. What the submission prints is drained by a thread, kept up
to a few KB, and never reaches our own output.

Whose fault an error inside the worker is, is decided here too, never by the worker: once
the submission's module has run, the worker's own code is the submission's to tamper with.
When the worker reports a failure of schedcheck's code (or a reply that is no trace), the
same request runs again on the reference in a fresh worker (`_theirs`): if it runs through,
the worker broke only with the submission in it, and the run is the submission's failure;
if it breaks there too, the fault is ours (exit 3).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any

from schedcheck.faults import (
    CheckerError,
    Failure,
    SubmissionError,
    SubmissionFailure,
    WorkerError,
)
from schedcheck.sandbox import stack, uids
from schedcheck.sandbox.beat import Board, board_fd

# All a worker inherits of the checker's environment: the submission must not read its
# secrets (SCHEDCHECK_REDIS_URL may carry a password, CI runners hold tokens). The last
# two are for interpreters that need them to start (a shared libpython outside /usr).
_PASSED_ON = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "PYTHONHOME",
    "SCHEDCHECK_NO_NAMESPACES",
)


TAMPERED = (
    "the checker's code in your worker failed after your module was imported, and the same "
    "request runs through on the reference in a fresh worker: did your module change modules "
    "other than its own (schedcheck's, or the standard library's)? What failed: {what}"
)

# How many call timeouts of wall time a call that is only starved of CPU may take at most.
STARVED_CAP = 10
SEND_TIMEOUT = 10.0  # seconds a command may take to be written to the worker's socket


# The default limits, every command's and the plugin's: one place each.
DEFAULT_CALL_TIMEOUT = 2.0  # seconds for one call into the code under test
DEFAULT_MEMORY_MB = 1024  # the worker's address space


@dataclass(frozen=True)
class Limits:
    call_timeout: float = DEFAULT_CALL_TIMEOUT  # seconds for one schedule() or update()
    memory: int = DEFAULT_MEMORY_MB << 20  # bytes of address space (RLIMIT_AS)
    output: int = 4096  # bytes of the submission's output kept for the report
    start_timeout: float = 60.0  # seconds to start, load and contract-check
    cpu: int = 1800  # CPU seconds a worker may use (a spinning thread left running stops)


TAIL = 8192  # bytes of a worker's output kept for a stack dump
SAMPLES = 3  # stack dumps of a hung call: what they share is the loop (stack.loop)


class _Output:
    """Drains a pipe in a thread so the worker never blocks on a full pipe."""

    def __init__(self, pipe: IO[bytes], keep: int) -> None:
        self.keep, self.kept, self.total = keep, bytearray(), 0
        # The stream's last bytes and how many it has carried, whatever `keep` allows: a
        # stack dump asked of a hung worker (stack.py) is read from here.
        self.tail, self.carried = bytearray(), 0
        self.fd = pipe.fileno()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._drain, args=(pipe,), daemon=True)
        self.thread.start()

    def _drain(self, pipe: IO[bytes]) -> None:
        fd = pipe.fileno()
        while True:
            select.select([fd], [], [])
            with self.lock:  # read and keep as one: take() never sees a chunk in between
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return
                self.total += len(chunk)
                self.carried += len(chunk)
                self.tail = (self.tail + chunk)[-TAIL:]
                room = self.keep - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]

    def take(self) -> str:
        """What was printed since the last take(), once the pipe holds nothing more (the
        worker wrote it before it answered, but this thread may not have read it yet)."""
        for _ in range(100):
            if not self._pending():
                break
            time.sleep(0.001)
        with self.lock:
            text = stack.strip(self.kept.decode(errors="replace"))
            if self.total > len(self.kept):
                text += f"\n[... {self.total - len(self.kept)} more bytes not shown]"
            self.kept, self.total = bytearray(), 0
        return text

    def since(self, mark: int) -> str:
        """What the stream carried after its `mark`-th byte (as far as the tail holds)."""
        with self.lock:
            new = self.carried - mark
            return bytes(self.tail[-new:]).decode(errors="replace") if new > 0 else ""

    def _pending(self) -> bool:
        """Whether the pipe holds bytes not yet kept (under the lock: none half-read)."""
        with self.lock:
            try:
                return self.thread.is_alive() and bool(select.select([self.fd], [], [], 0)[0])
            except (OSError, ValueError):  # the pipe is closed: nothing more to read
                return False


class Sandbox:
    """Code under test (a submission file, an engine's sources folder) run in a worker
    process of its own, in a box; what the worker runs is `worker`, a module's name."""

    # Whether the worker dumps its stack on stack.SIGNAL (a P07 worker does: drive/
    # worker.py). An engine's does not, and the signal's default would end it: not sent.
    dumps_stack = False

    def __init__(
        self,
        path: str | Path,
        limits: Limits | None,
        worker: str,
        referee: bool = False,
        what: str = "the submission",
    ) -> None:
        self.path = str(Path(path).resolve())
        self.what = what  # how its messages name the code under test
        self.worker = worker  # the module the worker runs: a submission's, or an engine's
        self.is_referee = referee  # the reference, run to tell whose fault an error is
        self._serial = 0  # the last command's number: a reply must carry it
        self.limits = limits or Limits()
        self.label = self.path
        self.proc: subprocess.Popen[bytes] | None = None
        self.conn: Connection | None = None
        self.output = ""  # what the submission printed during the last run
        self._out: _Output | None = None
        self.where: tuple[int, str] = (0, "start")
        self.call_started = 0.0  # when the current call began (the board's word for it)
        self.call_cpu: float | None = None  # the worker's CPU seconds at that moment
        self.workdir: str | None = None  # the worker's fresh working directory
        self.lease: uids.Lease | None = None  # the box's own uid, when started as root
        self.isolation = ""  # the box's level, once started: full, uid or process
        self._worker_pid: tuple[int, int] | None = None  # (process started, its worker)
        self.board: Board | None = None  # the worker's heartbeat page
        self._seen = 0  # the board's counter when last read
        self._torn = False  # the board's last read found a beat being written (_sync)
        self._beat_limit: int | None = None  # the counter no honest worker passes (_send)
        self._spent = 0.0  # what stopped workers used of a time budget (`used`)
        self._born = time.monotonic()
        self._copy = ""  # the box's copy of the code under test: its frames in a stack dump
        # Where a call hung for the whole call timeout (the functions on its stack, stack.
        # loop), once one did: from then on a call is stopped after a short wait if it is in
        # that same loop (a hang's shrinking costs a fraction of the timeout a candidate),
        # and waited for in full anywhere else. `strict`: in full whatever (a final replay).
        self.hang_at: tuple[str, ...] | None = None
        self.strict = False
        self._wait = self.limits.call_timeout  # the current call's deadline (_receive)

    # -- the worker's life ------------------------------------------------------------------

    def start(self) -> None:
        """Start a worker; raise SubmissionError if the submission cannot be driven, and
        WorkerError if the worker failed before it even read the submission (ours)."""
        ours, theirs = socket.socketpair()
        self._serial = 0  # the worker's first messages (booted, ready) answer "command 0"
        # A worker that stops reading (it floods replies nobody asked for, and waits for us to
        # read them while we wait for it to read a command) must not hang us: a command that
        # cannot be written within this is the worker's failure (_send). An honest worker
        # reads every command at once: it is idle when we send one.
        seconds = int(SEND_TIMEOUT)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", seconds, 0))
        copy = self._copy = self._make_box()
        assert self.workdir is not None
        env = {name: os.environ[name] for name in _PASSED_ON if name in os.environ}
        env["PYTHONPATH"] = os.pathsep.join(sys.path)
        env["PYTHONUNBUFFERED"] = "1"  # a debug print reaches the report, not a buffer
        # str hashes the same in every worker process: a set of seq_ids iterates in one
        # order, so a run is the same in the worker that replays it as in the one that found
        # it (a worker is restarted after a hang or a crash). Set orders still vary from
        # workload to workload: the ids are drawn from several naming schemes (issue 47).
        env["PYTHONHASHSEED"] = "0"
        uid = "-" if self.lease is None else str(self.lease.uid)
        page = board_fd()
        self.board, self._seen, self._torn = Board(page), 0, False
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                self.worker,
                str(theirs.fileno()),
                copy,
                str(self.limits.memory),
                self.workdir,
                uid,
                str(self.limits.cpu),
                str(page),
            ],
            pass_fds=[theirs.fileno(), page],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        theirs.close()
        os.close(page)  # the mapping keeps the page
        self.conn = Connection(ours.detach())
        assert self.proc.stdout is not None
        self._out = _Output(self.proc.stdout, self.limits.output)
        self.where = (0, "starting the worker")
        booted = self._receive(self.limits.start_timeout)
        if isinstance(booted, Failure) or booted.get("kind") != "booted":
            self.stop()
            what = booted.message if isinstance(booted, Failure) else f"it sent {booted!r}"
            raise WorkerError(f"the worker did not start ({what}), before it read the submission")
        self.isolation = str(booted.get("isolation", ""))
        self.where = (0, "loading the submission")
        ready = self._receive(self.limits.start_timeout)
        if isinstance(ready, Failure):
            self.stop()
            raise SubmissionError(ready.message)
        if ready.get("internal"):
            self.stop()
            what = f"the contract check failed:\n{ready['internal']}"
            if self._theirs(lambda referee: None):  # the reference's worker got through it
                raise SubmissionError(TAMPERED.format(what=what))
            raise CheckerError(what)
        if ready.get("load_error"):
            self.stop()
            raise SubmissionError(f"{self.what} could not be loaded: {ready['load_error']}")
        if ready.get("problems"):
            self.stop()
            raise SubmissionError(
                "the submission does not keep the contract (docs/contract.md; "
                "`schedcheck contract` prints it):\n"
                + "\n".join(f"  - {p}" for p in ready["problems"])
            )

    def _make_box(self) -> str:
        """The box's private folder, holding its own copy of the submission (a file, or a
        folder's Python sources): owned by the box's own uid (lent now, when root),
        readable by nobody else. Returns the copy."""
        self.workdir = tempfile.mkdtemp(prefix="schedcheck-worker-")
        copy = os.path.join(self.workdir, os.path.basename(self.path))
        if os.path.isdir(self.path):
            shutil.copytree(self.path, copy, ignore=_not_python)
        else:
            shutil.copyfile(self.path, copy)
        if os.geteuid() == 0:
            try:
                self.lease = uids.lease()
            except OSError as e:
                raise WorkerError(f"no uid of its own for the box: {e}") from None
            for folder, dirs, files in os.walk(self.workdir):
                for path in (folder, *(os.path.join(folder, n) for n in dirs + files)):
                    os.chown(path, self.lease.uid, self.lease.uid)
        return copy

    def used(self) -> float:
        """Seconds the code under test has used of a time budget, over all its workers: their
        CPU time as the kernel counts it, and the timeout of every call that hung (a sleep
        uses no CPU). The machine's load changes neither; the checker's own work is not in
        it. Where /proc cannot be read (not Linux), wall time since this sandbox began."""
        if not _PROC:
            return time.monotonic() - self._born
        return self._spent + self._cpu()

    def _cpu(self) -> float:
        fields = proc_stat(self.worker_pid()) if self.proc is not None else []
        try:
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime+stime
        except (IndexError, ValueError):
            return 0.0

    def stop(self) -> None:
        """Kill the worker and everything it started, however detached; free its uid."""
        self._spent += self._cpu()
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            if self._out is not None:
                self._out.thread.join(timeout=5)
        if self.lease is not None:
            self.lease.release()  # what left the process group, at the uid level
        if self.conn is not None:
            self.conn.close()
        if self.board is not None:
            self.board.close()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.proc = self.conn = self.workdir = self.lease = self._worker_pid = self.board = None
        self.call_cpu = None  # a fresh worker starts from nothing

    def worker_pid(self) -> int | None:
        """The pid of the process that runs the submission: in a PID namespace, the
        grandchild of the process started (it and the namespace's init only wait). Found
        once per worker: it never changes."""
        if self.proc is None:
            return None
        if self._worker_pid is not None and self._worker_pid[0] == self.proc.pid:
            return self._worker_pid[1]
        pid = self.proc.pid
        for _ in range(2 if self.isolation == "full" else 0):
            try:
                pid = int(Path(f"/proc/{pid}/task/{pid}/children").read_text().split()[0])
            except (OSError, IndexError, ValueError):
                return None
        self._worker_pid = (self.proc.pid, pid)
        return pid

    def _threads_left(self, step: int) -> Failure | None:
        """The spec's scheduler is single-threaded: a thread still running once a run has
        ended works behind the checker's back (and burns CPU no call is charged for).
        Counted by the kernel (/proc), so the submission cannot hide it."""
        fields = proc_stat(self.worker_pid())  # one short line, read after every run
        try:
            threads = int(fields[17])  # num_threads, /proc/PID/stat's 20th field
        except (IndexError, ValueError):
            return None
        if threads <= 1:
            return None
        self.stop()  # the next workload gets a fresh worker, without the thread
        return Failure(
            step,
            "end of run",
            f"the submission left {threads - 1} thread(s) running after the "
            "run ended: the scheduler is a single-threaded state machine (spec)",
        )

    def _retire_if_spent(self) -> None:
        """A worker that used half its CPU-time limit is replaced before the next workload,
        so that the limit stops a runaway thread and never a long, correct campaign."""
        # The CPU time its last heartbeat gave: a worker that lies only hurts itself.
        if self.call_cpu is not None and self.call_cpu > self.limits.cpu / 2:
            self.stop()

    def _ensure(self) -> Connection:
        if self.conn is None:
            self.start()
        assert self.conn is not None
        return self.conn

    def _send(self, calls: int, **message: Any) -> None:
        """Send a command that makes at most `calls` calls into the submission; Unread if
        the worker does not take it (it stopped reading: the worker is stopped)."""
        conn = self._ensure()
        self._serial += 1
        try:
            conn.send_bytes(json.dumps({**message, "serial": self._serial}).encode())
        except OSError:  # SO_SNDTIMEO ran out, or the worker is gone
            step, call = self.where
            self.stop()
            raise Unread(
                Failure(
                    step,
                    call,
                    (
                        "the worker did not read the checker's next command within "
                        f"{SEND_TIMEOUT:g} s: it wrote replies nobody asked for "
                        "(its socket is full) or stopped reading"
                    ),
                )
            ) from None
        # Until the board names the call it starts, the worker is in our code (reading the
        # command): timed from now, its CPU from now, so a busy machine excuses it (_starved).
        self.call_started, self.call_cpu = time.monotonic(), self._worker_cpu()
        self._wait = self._first_wait()
        # The worker beats once per call: more beats than calls are the submission's doing
        # (it found the page and keeps a sleeping call alive). Capped, it cannot hang us.
        self._beat_limit = self._seen + 2 * calls

    def _receive(self, timeout: float | None = None) -> dict[str, Any] | Failure:
        """The next message, or a Failure if the worker hung, died or sent garbage.

        With no `timeout`, the deadline is the current call's: call_timeout from when the
        board says it began, stretched for a call that only waits for a core (_starved)."""
        conn = self.conn
        assert conn is not None
        try:
            if timeout is not None:
                if not conn.poll(timeout):
                    return self._hung(timeout)
            else:
                while not conn.poll(max(self._left(), 0.05)):
                    self._sync()
                    if self._beat_limit is not None and self._seen > self._beat_limit:
                        return self._forged()
                    if self._left() > 0 or self._starved():
                        continue  # a new call began, or it is runnable but barely ran
                    at, said = self._stack()
                    if self._wait < self.limits.call_timeout:  # a short wait (hang_at)
                        assert self.hang_at is not None
                        if at[: len(self.hang_at)] != self.hang_at:
                            self._wait = self.limits.call_timeout  # elsewhere: wait in full
                            continue
                        full = self.limits.call_timeout
                        said += f" (stopped early: where a call hung for {full:g} s before)"
                        return self._hung(self._wait, said)
                    self.hang_at = self.hang_at or at or None
                    return self._hung(self.limits.call_timeout, said)
            message = json.loads(conn.recv_bytes(1 << 26))
            # a reply to another command (stale, or forged) is no reply: streams never mix
            if not isinstance(message, dict) or message.get("serial") != self._serial:
                raise ValueError("not a reply to this command")
        except (EOFError, OSError):
            self._sync()
            return Failure(*self.where, self._death(*self.where))
        except (ValueError, RecursionError):  # nested too deep to decode: not a trace either
            self._sync()
            self.stop()
            call = self.where[1]
            return Failure(
                *self.where, f"the worker sent something that is not a trace during {call}"
            )
        self._sync()
        return message

    def _left(self) -> float:
        return self.call_started + self._wait - time.monotonic()

    def _first_wait(self) -> float:
        """How long a call is waited for before its stack is looked at: the call timeout,
        or, once a call hung at a line (hang_at) and no final replay is on (strict), a
        tenth of it (never under 0.1 s)."""
        full = self.limits.call_timeout
        return full if self.strict or self.hang_at is None else max(0.1, full / 10)

    def _stack(self) -> tuple[tuple[str, ...], str]:
        """Where the worker's main thread is now, asked with stack.SIGNAL: the functions
        SAMPLES dumps a few milliseconds apart share (stack.loop), and the first dump's
        frames in the code under test, as the report says them. ((), "") where it does not
        answer within a quarter second."""
        pid, out = self.worker_pid(), self._out
        if pid is None or out is None or not self.dumps_stack:
            return (), ""
        samples = []
        for _ in range(SAMPLES):
            mark = out.carried
            try:
                os.kill(pid, stack.SIGNAL)
            except OSError:
                break
            deadline = time.monotonic() + 0.25
            while not stack.complete(out.since(mark)) and time.monotonic() < deadline:
                time.sleep(0.002)
            frames = stack.ours(stack.parse(out.since(mark)), self._copy)
            if not frames:
                break
            samples.append(frames)
        if not samples:
            return (), ""
        return stack.loop(samples), stack.describe(samples[0], self._copy, self.path)

    def _sync(self) -> None:
        """Take the call the worker is in from its heartbeat board, if a new one began.

        A page still torn after Board.read's tries is a beat being written by a worker
        that lost its core in mid-write (a busy machine: seen with a marathon's tens of
        thousands of beats a second, where the one read at the deadline found it so): a
        call is beginning, timed from now. Only the first torn read in a row counts so: a
        page kept torn (a submission writing it) gains one timeout, then _starved judges."""
        beat = None if self.board is None else self.board.read()
        if beat is None:
            if self.board is not None and not self._torn:
                self._torn = True
                self.call_started, self.call_cpu = time.monotonic(), self._worker_cpu()
                self._wait = self._first_wait()
            return
        self._torn = False
        if beat.counter <= self._seen:
            return  # nothing new; a counter that went back is not believed either
        self._seen = beat.counter
        self._wait = self._first_wait()  # a new call: its own deadline
        self.where = (beat.step, beat.call)
        self.call_started = min(beat.started, time.monotonic())  # never in the future
        self.call_cpu = beat.cpu

    def _forged(self) -> Failure:
        step, call = self.where
        self.stop()
        return Failure(
            step,
            call,
            f"{call} at step {step}: the worker's heartbeat page says more calls "
            "began than the run makes: the submission writes the checker's own page",
        )

    def _hung(self, wait: float, said: str = "") -> Failure:
        self._spent += wait  # charged whether it spun or slept (`used`)
        self._sync()
        step, call = self.where
        hog = self._memory_note()
        self.stop()
        return Failure(
            step,
            call,
            f"{call} did not return within {wait:g} s at step {step}{hog}{said}",
            hung=True,
        )

    def _starved(self) -> bool:
        """Whether a call past its deadline was only waiting for a core: the worker is
        runnable (or in uninterruptible I/O) and has used under half the wait (the timeout,
        or the short wait after a hang: _first_wait) of CPU since the call began. A loop
        uses the CPU it gets, a sleep is not runnable, so neither is excused; a correct
        call on a loaded machine (a class graded at once on two cores) is, up to
        STARVED_CAP waits of wall time. Linux only: elsewhere the
        timeout is wall time."""
        if self.proc is None or self.call_cpu is None:
            return False
        if time.monotonic() - self.call_started > STARVED_CAP * self._wait:
            return False
        fields = proc_stat(self.worker_pid())
        cpu = _cpu(fields)
        if cpu is None:
            return False
        return fields[0] in ("R", "D") and cpu - self.call_cpu < self._wait / 2

    def _worker_cpu(self) -> float | None:
        """The worker's CPU seconds so far, as the kernel counts them (None: unreadable)."""
        return None if self.proc is None else _cpu(proc_stat(self.worker_pid()))

    def _memory_note(self) -> str:
        """Say so when a hung worker was filling its memory cap: a hog, not a loop."""
        try:
            status = Path(f"/proc/{self.worker_pid()}/status").read_text()
        except OSError:
            return ""
        for line in status.splitlines():
            if line.startswith("VmSize:"):
                used = int(line.split()[1]) << 10
                cap = self.limits.memory
                if used > cap // 2:
                    return (
                        f", while holding {used >> 20} MiB of its {cap >> 20} MiB memory cap "
                        "(a memory hog?)"
                    )
        return ""

    def _death(self, step: int, call: str) -> str:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self.stop()
        if code is not None and self.isolation == "full" and code > 128:
            code = 128 - code  # box.py passes a death by signal n on as 128 + n
        if code is not None and code < 0:
            how = f"was killed by signal {signal.Signals(-code).name}"
        else:
            how = f"exited with code {code}"
            if call != "starting the worker":  # only then can the submission have done it
                how += ": the submission ended the process (os._exit?)"
        return f"the worker process {how} during {call} at step {step}"

    # -- whose fault -----------------------------------------------------------------------

    def referee(self) -> Sandbox | None:
        """A fresh sandbox running the reference, to tell whose fault an error is; None
        where there is no reference to compare with (an engine's worker, a referee)."""
        return None

    def _theirs(self, replay: Callable[[Sandbox], object]) -> bool:
        """Whether an error of this worker's is the submission's doing: `replay(referee)`
        repeats the request on the reference in a fresh worker, started here. True only if
        it runs through there; whatever else happens (it fails the same way, or in another,
        or this is no submission's worker) the fault stays ours: the doubt goes to the
        student."""
        referee = self.referee()
        if referee is None:
            return False
        try:
            referee.start()
            replay(referee)
        except (CheckerError, SubmissionError, SubmissionFailure):
            return False
        finally:
            referee.stop()
        return True

    def _blamed(self, what: str, replay: Callable[[Sandbox], object]) -> Failure:
        """The submission's failure for `what` went wrong, if `_theirs`; else CheckerError."""
        step, call = self.where
        if self._theirs(replay):
            return Failure(step, call, TAMPERED.format(what=what))
        raise CheckerError(what)

    def request(self, calls: int = 1, **message: Any) -> Any:
        """One command that makes at most `calls` calls into the code under test (an engine's
        whole run): its result, or SubmissionFailure."""
        try:
            self._send(calls, **message)
        except Unread as e:
            raise SubmissionFailure(e.failure) from None
        while True:
            reply = self._receive()
            if isinstance(reply, Failure):
                raise SubmissionFailure(reply)
            if reply.get("kind") == "result":
                return reply.get("value")
            if reply.get("kind") == "failure":
                raise SubmissionFailure(Failure.from_worker(reply["failure"]))
            if reply.get("kind") == "internal":
                self.stop()
                replay = functools.partial(Sandbox.request, calls=calls, **message)
                raise SubmissionFailure(self._blamed(internal(reply), replay))


class Unread(Exception):
    """The worker did not take a command: `failure` says so."""

    def __init__(self, failure: Failure) -> None:
        self.failure = failure


def _not_python(folder: str, names: list[str]) -> list[str]:
    """What a folder's copy leaves out: all but its Python sources and their folders."""
    return [
        n for n in names if not n.endswith(".py") and not os.path.isdir(os.path.join(folder, n))
    ]


_PROC = Path("/proc/self/stat").exists()


def _cpu(fields: list[str]) -> float | None:
    """CPU seconds (utime + stime) from proc_stat's fields, None where they are not there."""
    try:
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (IndexError, ValueError):
        return None


def proc_stat(pid: int | None) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state first), [] if unreadable:
    what the kernel, not the worker, says of it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def internal(message: dict[str, Any]) -> str:
    return (
        "schedcheck's driver failed inside the worker (a submission that tampers with the "
        f"worker's modules can cause this too):\n{message.get('message')}"
    )
