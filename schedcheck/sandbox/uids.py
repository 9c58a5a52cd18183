"""A uid of its own for every box: lent by the parent, held while the worker lives, swept after.

Box uids come from a range no account uses (checked against the user database), one at a
time per holder: a lock file per uid, held with flock by the process that started the
worker, so graders running at once (`grade -j`, `pytest -n`) never share one, and a crashed
grader's uids come free by themselves. When the box ends, every process the uid still runs
is killed (a detached child at the `uid` level, where no PID namespace ends it). Files need
no sweep: a box writes only inside its own root, in the folder the parent removes
(docs/isolation.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import random
import signal
import tempfile
import time
from pathlib import Path

BASE, SPAN = 1_900_000_000, 1 << 20  # far above any account's uid


def _lock_dir() -> Path:
    where = Path("/run") if Path("/run").is_dir() else Path(tempfile.gettempdir())
    folder = where / "schedcheck-uids"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


class Lease:
    """One box uid, held until `release()`."""

    def __init__(self, uid: int, fd: int) -> None:
        self.uid = uid
        self._fd: int | None = fd

    def release(self) -> None:
        """Kill what the uid still runs, free the uid."""
        if self._fd is None:
            return
        sweep(self.uid)
        os.close(self._fd)
        self._fd = None


def lease(tries: int = 64) -> Lease:
    """A free box uid; OSError if none could be had."""
    folder = _lock_dir()
    for _ in range(tries):
        uid = BASE + random.randrange(SPAN)
        try:
            pwd.getpwuid(uid)
            continue  # an account has it
        except KeyError:
            pass
        fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # another box holds it
        sweep(uid)  # whatever an earlier holder left
        return Lease(uid, fd)
    raise OSError(f"no free box uid in {tries} tries")


def processes_of(uid: int) -> list[int]:
    """The live pids whose real uid is `uid` (a zombie is dead already: not listed)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = dict(
                line.split(":", 1) for line in (entry / "status").read_text().splitlines()
            )
            if int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith("Z"):
                found.append(int(entry.name))
    return found


def sweep(uid: int) -> None:
    """Kill every process of `uid` (again, while a fork bomb still forks)."""
    for _ in range(200):  # a SIGKILLed process takes a moment to die: up to about 2 s
        pids = processes_of(uid)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
