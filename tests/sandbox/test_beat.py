"""The heartbeat board (schedcheck/sandbox/beat.py): each call into a submission gets its own
deadline, with no message per call, and the parent names the call a worker hung in."""

from __future__ import annotations

import os
from pathlib import Path

from schedcheck.drive.isolated import Isolated
from schedcheck.sandbox.beat import Board, board_fd
from schedcheck.sandbox.process import Limits
from tests.catalogue import inline_reference
from tests.workloads import EXAMPLES


def test_the_board_carries_the_last_call_begun() -> None:
    fd = board_fd()
    worker, parent = Board(fd), Board(fd)
    os.close(fd)
    try:
        assert parent.read() is not None and parent.read().counter == 0  # type: ignore[union-attr]
        worker.write(3, "schedule()", 12.5, 0.25)
        worker.write(4, "update() again " + "x" * 40, 13.0, 0.5)
        beat = parent.read()
        assert beat is not None
        assert (beat.counter, beat.step, beat.started, beat.cpu) == (4, 4, 13.0, 0.5)
        assert beat.call == ("update() again " + "x" * 40)[:32]
    finally:
        worker.close()
        parent.close()


def test_a_page_caught_mid_write_is_not_read() -> None:
    fd = board_fd()
    board = Board(fd)
    os.close(fd)
    try:
        board.page[0:8] = (7).to_bytes(8, "little")  # an odd counter: a write under way
        assert board.read() is None
    finally:
        board.close()


SLOW_CALLS = """
import time
from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus


class Scheduler(_Reference):
    def schedule(self):
        time.sleep({pause})
        return super().schedule()
"""


def slow(tmp_path: Path, pause: float) -> Path:
    path = tmp_path / "p07_scheduler.py"
    path.write_text(inline_reference(SLOW_CALLS.format(pause=pause)))
    return path


def test_every_call_has_its_own_deadline(tmp_path: Path) -> None:
    """Four schedule() calls of 0.6 s each, under a 1 s timeout: 2.4 s for the run, and no
    call late. A deadline that was not reset per call would call this correct file hung."""
    worker = Isolated(slow(tmp_path, 0.6), Limits(call_timeout=1.0))
    try:
        trace = worker.run(EXAMPLES["example2"])
        assert trace.failure is None and len(trace.steps) == 4
    finally:
        worker.stop()


def test_a_hung_call_is_named_by_the_board(tmp_path: Path) -> None:
    worker = Isolated(slow(tmp_path, 5), Limits(call_timeout=0.5))
    try:
        trace = worker.run(EXAMPLES["example2"])
        assert trace.failure is not None
        message = trace.failure.message
        assert message.startswith("schedule() did not return within 0.5 s at step 1; "), message
        # and where it was (issue 54), read from the worker's own stack before it stopped
        assert message.endswith("in schedule: `time.sleep(5)`"), message
    finally:
        worker.stop()
