"""Steps held on the heartbeat page (schedcheck/drive/held.py): a run's steps travel a page
at a time, yet a run that hangs or dies is read to its last complete step, as when every
step was a message of its own; a page that says nothing consistent costs only its steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedcheck import scheduler
from schedcheck.drive.driver import play, run
from schedcheck.drive.held import HEAD, HELD_AT, ROOM, head, steps_held
from schedcheck.drive.isolated import Isolated
from schedcheck.drive.standalone import inline_reference
from schedcheck.model.workload import Config, Request, Workload
from schedcheck.sandbox.process import Limits

# The reference until the step `STOP` begins: then its schedule() hangs, or ends the
# process, as the file says.
SUBJECT = """
import os
import time

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]

STOP = {stop}


class Scheduler(_Reference):
    steps = 0

    def schedule(self):
        self.steps += 1
        if self.steps == STOP:
            {how}
        return super().schedule()
"""
HOW = {"hangs": "time.sleep(60)", "dies": "os._exit(7)"}

# Long enough that its steps fill the page several times before the stop.
LONG = Workload(
    Config(num_blocks=8, block_size=4, max_num_seqs=4, max_num_batched_tokens=16),
    tuple(Request(f"r{i}", 5, 12) for i in range(12)),
)


def subject(tmp_path: Path, stop: int, how: str) -> Isolated:
    path = tmp_path / "p07_scheduler.py"
    path.write_text(inline_reference(SUBJECT.format(stop=stop, how=HOW[how])))
    worker = Isolated(path, Limits(call_timeout=0.5))
    worker.start()
    return worker


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("stop", [1, 2, 7, 40])
def test_a_run_that_stops_is_read_to_its_last_complete_step(
    tmp_path: Path, how: str, stop: int
) -> None:
    expected = run(scheduler, LONG)
    assert len(expected.steps) > stop
    worker = subject(tmp_path, stop, how)
    try:
        trace = worker.run(LONG)
    finally:
        worker.stop()
    assert trace.failure is not None and (trace.failure.step, trace.failure.call) == (
        stop,
        "schedule()",
    ), trace.failure
    assert trace.steps == expected.steps[: stop - 1]


@pytest.mark.parametrize("how", HOW)
def test_a_script_that_stops_is_read_to_its_last_complete_step(tmp_path: Path, how: str) -> None:
    script = [["add", r.seq_id] for r in LONG.requests] + [["step"]] * 30
    expected = play(scheduler, LONG, script)
    worker = subject(tmp_path, 25, how)
    try:
        trace = worker.play(LONG, script)
    finally:
        worker.stop()
    assert trace.failure is not None and trace.failure.step == 25, trace.failure
    # A script's step is told once the next begins: the one before the stop is the last.
    assert trace.steps == expected.steps[:24]


def page(first: int, held: bytes, check: int | None = None) -> bytes:
    region = bytearray(4096 - HELD_AT)
    _, _, good = head(first, len(held))
    HEAD.pack_into(region, 0, first, len(held), good if check is None else check)
    region[HEAD.size : HEAD.size + len(held)] = held
    return bytes(region)


def test_a_page_is_read_only_where_it_says_something_consistent() -> None:
    assert steps_held(page(3, b"[1], [2]"), 3) == b"[[1], [2]]"
    assert steps_held(page(3, b"[1]"), 4) is None  # steps the parent has had already
    assert steps_held(page(3, b"[1]", check=0), 3) is None  # a torn or forged head
    assert steps_held(page(0, b""), 0) is None  # nothing held
    region = bytearray(page(0, b"[1]"))
    HEAD.pack_into(region, 0, 0, ROOM + 1, head(0, ROOM + 1)[2])
    assert steps_held(bytes(region), 0) is None  # more than the page holds
    assert steps_held(b"", 0) is None
