"""The heartbeat board: one shared page where the worker says which call it is in.

Before every call into the submission the worker writes the call (step, name), when it
began (CLOCK_MONOTONIC, which every process of the machine shares, namespaces or not) and
its CPU time so far. The parent reads the page only when a reply is late, so a call costs
no message: the per-call deadline stays exact without a round of messages per call.

A seqlock keeps a read whole: the worker makes the counter odd, writes, makes it even; a
reader retries while it is odd or changed under it; a page still torn after its tries is a
worker that lost its core in mid-beat, which the parent takes for a call beginning
(Sandbox._sync). Like a heartbeat message before it,
what the page says is the worker's claim: a submission that forges it only delays its
own verdict (the CPU-time limit and the starved-call cap still hold).
"""

from __future__ import annotations

import mmap
import os
import struct
import tempfile
from dataclasses import dataclass

_LAYOUT = struct.Struct("<QQdd32s")  # counter, step, started, cpu, call name
SIZE = mmap.PAGESIZE


@dataclass(frozen=True)
class Beat:
    counter: int  # calls begun so far (even), 0 before the first
    step: int
    call: str
    started: float  # time.monotonic() when the call began
    cpu: float  # the worker's CPU seconds then


def board_fd() -> int:
    """A file for the page, to pass to the worker: memory only where Linux allows."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("schedcheck-beat", 0)
    else:  # pragma: no cover - macOS and the BSDs
        with tempfile.TemporaryFile() as file:
            fd = os.dup(file.fileno())
    os.ftruncate(fd, SIZE)
    return fd


class Board:
    """The page, mapped by one side (the parent reads, the worker writes)."""

    def __init__(self, fd: int) -> None:
        self.page = mmap.mmap(fd, SIZE)
        self.counter = 0

    def write(self, step: int, call: str, started: float, cpu: float) -> None:
        self.counter += 2
        struct.pack_into("<Q", self.page, 0, self.counter - 1)
        _LAYOUT.pack_into(self.page, 0, self.counter - 1, step, started, cpu, call.encode()[:32])
        struct.pack_into("<Q", self.page, 0, self.counter)

    def read(self) -> Beat | None:
        """The last call begun, or None if the page is torn or garbage after some tries."""
        for _ in range(100):
            counter, step, started, cpu, name = _LAYOUT.unpack_from(self.page)
            if counter % 2 == 0 and struct.unpack_from("<Q", self.page)[0] == counter:
                call = name.rstrip(b"\0").decode(errors="replace")
                return Beat(counter, step, call, started, cpu)
        return None

    def close(self) -> None:
        self.page.close()
