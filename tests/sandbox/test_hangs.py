"""A hung call (issue 54): the report names the line the worker was executing; once a call
hung for the whole call timeout, a call in the same loop is stopped after a short wait and
a call anywhere else is still waited for in full; `strict` waits in full whatever."""

from __future__ import annotations

import time
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from schedcheck.drive.isolated import Isolated
from schedcheck.faults import Failure
from schedcheck.model.workload import Config, Request, Workload
from schedcheck.sandbox import stack
from schedcheck.sandbox.process import Limits
from schedcheck.suite.holds import in_full_when_final
from tests.catalogue import inline_reference

TIMEOUT = 1.0
LIMITS = Limits(call_timeout=TIMEOUT)

# Hangs in phase 2 when a request waits with every block in use (a loop through a helper,
# as the students write it); update() is slow, not hung, for a sequence named
# "slow": a correct call that takes half the timeout, in another function.
SUBJECT = """
import time

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def _full(self):
        return self.blocks_used == self.num_blocks

    def _schedule_waiting(self, budget):
        while self.waiting and self._full():
            pass  # spins: only update() frees blocks
        super()._schedule_waiting(budget)

    def update(self):
        if any(seq.seq_id == "slow" for seq in self.running):
            time.sleep(0.5)
        return super().update()
"""

ONE_BLOCK = Config(num_blocks=1, block_size=4, max_num_seqs=2, max_num_batched_tokens=8)
HANGS = Workload(ONE_BLOCK, (Request("a1", 3, 2), Request("a2", 3, 2)))
SLOW = Workload(ONE_BLOCK, (Request("slow", 2, 1),))


def subject(tmp_path: Path) -> Isolated:
    path = tmp_path / "p07_scheduler.py"
    path.write_text(inline_reference(SUBJECT))
    worker = Isolated(path, LIMITS)
    worker.start()
    return worker


def test_the_report_names_the_line_and_its_callers(tmp_path: Path) -> None:
    worker = subject(tmp_path)
    try:
        trace = worker.run(HANGS)
    finally:
        worker.stop()
    assert trace.failure is not None and trace.failure.hung, trace.failure
    message = trace.failure.message
    assert f"did not return within {TIMEOUT:g} s" in message, message
    assert "it was executing line" in message and "p07_scheduler.py" in message, message
    # Inside _full or on the loop's own line; the loop's function is named either way.
    assert "_schedule_waiting" in message, message
    assert worker.hang_at is not None and "_schedule_waiting" in worker.hang_at


def test_the_same_loop_is_stopped_early_and_a_slow_call_elsewhere_is_not(tmp_path: Path) -> None:
    worker = subject(tmp_path)
    try:
        worker.run(HANGS)  # the first hang: waited for in full
        start = time.monotonic()
        again = worker.run(HANGS)
        early = time.monotonic() - start
        slow = worker.run(SLOW)
    finally:
        worker.stop()
    assert again.failure is not None and again.failure.hung, again.failure
    assert "stopped early" in again.failure.message and early < TIMEOUT, again.failure.message
    assert slow.failure is None, slow.failure  # waited past the short wait: no false hang


def test_strict_waits_in_full(tmp_path: Path) -> None:
    worker = subject(tmp_path)
    try:
        worker.run(HANGS)
        worker.strict = True
        start = time.monotonic()
        again = worker.run(HANGS)
        waited = time.monotonic() - start
    finally:
        worker.stop()
    assert again.failure is not None and "stopped early" not in again.failure.message
    assert waited >= TIMEOUT, waited


def test_a_worker_cannot_say_its_call_hung() -> None:
    said = {"step": 1, "call": "schedule()", "message": "hung, honestly", "hung": True}
    assert not Failure.from_worker(said).hung


DUMP = """printed before
Stack (most recent call first):
  File "/box/p07_scheduler.py", line 12 in _full
  File "/box/p07_scheduler.py", line 15 in _schedule_waiting
  File "/srv/schedcheck/drive/driver.py", line 300 in call
printed after
"""


def test_a_dump_is_read_and_kept_out_of_the_printed_output(tmp_path: Path) -> None:
    frames = stack.parse(DUMP)
    assert [f.function for f in frames] == ["_full", "_schedule_waiting", "call"]
    assert stack.strip(DUMP) == "printed before\nprinted after\n"
    mine = stack.ours(frames, "/box/p07_scheduler.py")
    assert [f.line for f in mine] == [12, 15]
    original = tmp_path / "p07_scheduler.py"
    original.write_text("\n" * 11 + "        return True\n\n\n        while self._full():\n")
    said = stack.describe(mine, "/box/p07_scheduler.py", str(original))
    assert said == (
        "; it was executing line 12 of p07_scheduler.py, in _full: `return True`, called "
        "from _schedule_waiting (line 15: `while self._full():`)"
    )
    assert stack.parse("no dump here") == [] and stack.describe([], "/box/x.py", "x.py") == ""


def test_a_dump_is_complete_once_it_reaches_the_outermost_frame() -> None:
    """A dump still being written (a loaded machine: the worker descheduled between two
    frames) is waited for, or two samples would share no outermost function."""
    head = 'Stack (most recent call first):\n  File "/box/p.py", line 3 in _full\n'
    assert not stack.complete(head) and not stack.complete("no dump")
    assert stack.complete(head + '  File "<frozen runpy>", line 88 in _run_module_as_main\n')
    assert stack.complete(head + '  File "/srv/worker.py", line 9 in <module>\n')
    assert stack.complete(head + "  ...\n")  # faulthandler cut a deep stack short
    assert not stack.complete(head + '  File "/srv/worker.py", line 9 in <mod')


def test_the_loop_is_what_every_sample_shares() -> None:
    def frames(*names: str) -> list[stack.Frame]:
        return [stack.Frame("/box/p.py", 1, name) for name in reversed(names)]

    samples = [
        frames("schedule", "_schedule_running", "_try_grow", "_blocks_for"),
        frames("schedule", "_schedule_running"),
        frames("schedule", "_schedule_running", "_try_grow"),
    ]
    assert stack.loop(samples) == ("schedule", "_schedule_running")
    assert stack.loop([frames("schedule"), []]) == ()


class _Strict:
    """An implementation's `strict` switch, noting what it was at each example."""

    def __init__(self) -> None:
        self.strict = False
        self.seen: list[bool] = []


def test_only_a_shrunk_failures_final_replay_waits_in_full() -> None:
    generated, explicit = _Strict(), _Strict()

    @given(st.integers(0, 1000))
    def fails_past_ten(n: int) -> None:
        with in_full_when_final(generated):  # type: ignore[arg-type]
            generated.seen.append(generated.strict)
        assert n <= 10

    @example(500)
    @given(st.integers(0, 1000))
    def fails_in_an_explicit_example(n: int) -> None:
        with in_full_when_final(explicit):  # type: ignore[arg-type]
            explicit.seen.append(explicit.strict)
        assert n <= 10

    for test, impl in ((fails_past_ten, generated), (fails_in_an_explicit_example, explicit)):
        try:
            test()
        except AssertionError:
            pass
        else:
            raise AssertionError("the property did not fail")
        assert impl.strict is False
    assert generated.seen[-1] is True and not any(generated.seen[:-1]), generated.seen
    assert explicit.seen == [False], explicit.seen
