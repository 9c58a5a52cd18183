"""The box a worker runs a submission in: its own uid, PID, mount and network namespaces.

Entered by the worker itself (schedcheck/sandbox/worker.py), as root, after it imported all it
needs and before it reads the submission. What it can have depends on the machine, and the
level says which (docs/isolation.md):

- `full`: root and namespaces. A PID namespace whose init ends with the worker, so that
  nothing it started survives it, however detached; a network namespace of its own with
  only its loopback, up (a connection reaches nothing but the box itself: an engine that
  binds a port while it is built, as nano-vllm's derivatives do, can); a mount namespace
  and a root of its own (a tmpfs holding an empty /tmp and an /etc/hosts naming localhost:
  no file of the machine's is in view); its own uid, which no account and no
  other box uses, so it can signal, read or write no other box; a process limit on that
  uid (a fork bomb fails alone) and a CPU-time limit.
- `uid`: root without namespaces: the own uid, a root of its own (a folder, chroot) and the
  limits; the parent kills whatever the uid still runs when the worker ends.
- `process`: not root: a process of the caller's user, with the limits that need no
  privilege (memory, core and file size, CPU time). It can signal and read what that user can.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import resource
import signal
import socket
import struct
from dataclasses import dataclass

# What each isolation level is, in a line (docs/isolation.md has the table).
LEVELS = {
    "full": "a uid of its own, its own PID, mount and network namespaces, loopback only",
    "uid": "a uid of its own, no namespaces on this machine",
    "process": "a process of your own user: not root, so no uid of its own",
    "none": "in this very process (--in-process: trusted code only)",
}

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV = 0x4000, 1 << 18, 0x2, 0x4
PR_SET_PDEATHSIG = 1  # linux/prctl.h
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1  # linux/sockios.h, linux/if.h
HOSTS = "127.0.0.1 localhost\n::1 localhost\n"  # the box's /etc/hosts


@dataclass(frozen=True)
class BoxLimits:
    """What one box may use."""

    memory: int = 1 << 30  # RLIMIT_AS bytes
    processes: int = 32  # RLIMIT_NPROC of the box's uid: threads count too
    cpu: int = 1800  # RLIMIT_CPU seconds: stops threads a submission leaves spinning
    tmp: int = 16 << 20  # bytes of the private /tmp


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def enter(uid: int | None, workdir: str, limits: BoxLimits, namespaces: bool = True) -> str:
    """Put this process in the best box the machine allows; return its level. Without
    `namespaces` (SCHEDCHECK_NO_NAMESPACES, to test or to debug) it is `uid` at best.

    With namespaces the process forks twice (see `_wait_for`); only the worker returns.
    """
    if os.geteuid() != 0 or uid is None:
        _limit(limits)
        return "process"
    level = "uid"
    try:
        if not namespaces:
            raise OSError("namespaces turned off")
        _check(
            _libc().unshare(
                CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS
            ),
            "unshare",
        )
        level = "full"
    except OSError:
        pass  # a container without the capability, a kernel without namespaces
    if level == "full":
        loopback_up()
    if level == "full":
        _wait_for(os.fork())  # the child is init of the new PID namespace
    _own_root(workdir, level == "full", limits.tmp)
    if level == "full":
        _wait_for(os.fork())  # its child runs the submission, with ordinary signals
    os.setgroups([])
    _limit(limits)
    os.setgid(uid)
    os.setuid(uid)
    return level


def loopback_up() -> None:
    """Bring the new network namespace's loopback up (it starts down): what the box binds
    or connects to on it is the box itself, so nothing outside is reachable, and an engine
    that looks for a free port while it is built finds one."""
    ifreq = struct.Struct("16sh22x")  # struct ifreq: the name, then ifr_flags
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        got = fcntl.ioctl(s, SIOCGIFFLAGS, ifreq.pack(b"lo", 0))
        flags = ifreq.unpack(got)[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, ifreq.pack(b"lo", flags | IFF_UP))


def _wait_for(child: int) -> None:
    """In the parent of a fork: only wait for `child` and end as it ends; die with our own
    parent (PDEATHSIG). In the child (0): return. Three processes result: the one started,
    outside; init of the PID namespace, which the kernel takes the whole namespace down
    with; and the worker, pid 2, which the submission's signals reach as usual."""
    if child == 0:
        return
    die_with_parent(None)
    _, status = os.waitpid(child, 0)
    # A death by signal n is passed on as exit status 128 + n, the shell's convention: an
    # init cannot kill itself with a signal its own namespace sends.
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def _own_root(workdir: str, mount: bool, size: int) -> None:
    """A root of its own, holding nothing but an empty /tmp: the box sees no file of the
    machine's (no submission folder, no classmate, no grader's checkout), and what it
    writes, no other box sees; it is gone with the box. With a mount namespace the root is
    a tmpfs of `size` bytes (mounts stop propagating to the host first); without one, a
    folder in `workdir`, which the parent removes. The worker imported all it needs before
    (and the submission's source is in memory)."""
    root = os.path.join(workdir, "root")
    os.mkdir(root, 0o755)
    if mount:
        libc = _libc()
        _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
        options = f"size={size},mode=755".encode()
        _check(
            libc.mount(b"tmpfs", root.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options),
            "mount the box's root",
        )
    tmp = os.path.join(root, "tmp")
    os.mkdir(tmp)
    os.chmod(tmp, 0o1777)
    os.mkdir(os.path.join(root, "etc"), 0o755)
    with open(os.path.join(root, "etc", "hosts"), "w") as hosts:
        hosts.write(HOSTS)  # `localhost` resolves to the box's own loopback
    os.chroot(root)
    os.chdir("/tmp")


def die_with_parent(parent: int | None) -> None:
    """Be killed when the parent dies, even in the middle of an endless loop.

    Set after any change of credentials, which clears it. With `parent`, exit at once if it
    died before the setting took (no longer our parent); None where it has no pid to
    compare (outside our PID namespace) or the check is not needed.
    """
    _check(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL), "prctl")
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def _limit(limits: BoxLimits) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory, limits.memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 24, 1 << 24))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu, limits.cpu + 5))
    if os.geteuid() == 0:  # per uid: only a uid of its own makes it a limit of this box
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
