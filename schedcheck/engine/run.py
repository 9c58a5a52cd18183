"""One run of an engine through a workload, whatever the engine: the skeleton every
adapter's driver fills in (calls into the engine, the heartbeat before each, arrivals and
aborts at their steps, the step bound and the other ways a run fails E5).

The skeleton owns the loop; a Driver (one per run, from the adapter) does what differs:
building the scheduler, adding and aborting a request, one step (schedule, the simulated
model runner, the update, the pool copied out), and reading the engine's state. Every call
into the engine goes through Run.call (E6 for anything it raises, the heartbeat first) and
every reading of its state through Run.read (a reading that fails: the engine cannot be
driven as its adapter drives it, a usage error, never a verdict).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from schedcheck.drive.driver import describe
from schedcheck.engine.trace import UNDRIVABLE, EngineFailure, EngineStep, EngineTrace
from schedcheck.engine.traits import Traits
from schedcheck.engine.workload import EngineRequest, EngineWorkload
from schedcheck.faults import CheckerError

__all__ = ["Driver", "PlainDriver", "Run", "Stop", "bound"]

_T = TypeVar("_T")


class Stop(Exception):
    """The run ends here, with `failure` (E5, E6, E8, or UNDRIVABLE: no verdict)."""

    def __init__(self, failure: EngineFailure) -> None:
        self.failure = failure


def bound(workload: EngineWorkload) -> int:
    """Steps within which every request must finish (E5): generous, since recompute
    preemption may redo a request's tokens once for every other request."""
    tokens = sum(len(r.prompt) + r.max_tokens for r in workload.requests)
    last = max((r.arrival for r in workload.requests), default=0)
    return last + tokens * (len(workload.requests) + 1) + 8


class Driver(Protocol):
    """What one run of one engine needs from its adapter, called by Run.play in this order."""

    # Exceptions that say the engine cannot be driven as it is set up (a value the user must
    # give), not that it failed: UNDRIVABLE when a call raises one.
    undrivable: tuple[type[BaseException], ...]
    source: str  # the engine's folder, which tracebacks are quoted from ("" for none)
    idle_call: str  # the call that tells the run nothing is left to schedule, as reports name it
    # Whether an empty step that changed nothing, with nothing left to arrive, is E5 (the
    # scheduler is stuck) rather than a wait for the bound.
    stuck_is_e5: bool

    def start(self) -> None:
        """Build the scheduler (through Run.call)."""

    def add(self, request: EngineRequest) -> None: ...

    def abort(self, request: EngineRequest) -> None:
        """Abort `request`, added and maybe finished by now, at the start of its step."""

    def send_chunk(self, request: EngineRequest, chunk: tuple[int, ...]) -> None:
        """A session's client sends its next chunk, at the start of the chunk's step (only
        an engine whose Features have `sessions` is given any)."""

    def close_session(self, request: EngineRequest) -> None:
        """A session's client closes it, at the start of its close's step."""

    def reset(self) -> None:
        """Clear the prefix cache, preempting the running requests, at the start of a step
        the workload names (only an engine whose Features have `resets` is given any)."""

    def idle(self) -> bool:
        """Whether the engine has nothing to schedule now (asked every step)."""
        ...

    def lost(self) -> list[str]:
        """Requests unfinished though the engine says it is idle: lost from its queues."""
        ...

    def unfinished(self) -> list[str]: ...

    def transferring(self) -> bool:
        """Whether a transfer outside the scheduler is still to end (a KV connector's):
        an empty step that changed nothing is no stuck engine then."""
        ...

    def step(self) -> None:
        """One step: schedule, the simulated model runner, the update; the step as seen goes
        into Run.steps as soon as it is (a step whose update raised is in the trace too)."""

    def unreadable(self, error: Exception) -> str:
        """Why the engine's state could not be read as the adapter reads it, in words."""
        ...

    def outputs(self) -> dict[str, tuple[int, ...]]: ...


class PlainDriver:
    """What the driver of an engine whose workloads draw no streaming-input sessions and no
    KV transfers says of them (its adapter's Features have neither)."""

    def send_chunk(self, request: EngineRequest, chunk: tuple[int, ...]) -> None:
        raise NotImplementedError("no streaming-input sessions are drawn for this engine")

    def close_session(self, request: EngineRequest) -> None:
        raise NotImplementedError("no streaming-input sessions are drawn for this engine")

    def transferring(self) -> bool:
        return False  # no transfers outside the scheduler


class Run:
    """One run: the step it is at, its steps so far, the heartbeat."""

    def __init__(
        self,
        workload: EngineWorkload,
        traits: Traits,
        beat: Callable[[int, str], None] | None = None,
    ) -> None:
        self.workload, self.traits, self.beat = workload, traits, beat
        self.step = 0
        self.steps: list[EngineStep] = []
        self.driver: Driver | None = None

    def call(self, what: str, fn: Callable[[], _T]) -> _T:
        """A call into the engine: the heartbeat first; whatever it raises ends the run (E6;
        SystemExit too: the engine must not end the run)."""
        if self.beat is not None:
            self.beat(self.step, what)
        assert self.driver is not None
        try:
            return fn()
        except Stop:
            raise
        except self.driver.undrivable as e:
            raise Stop(EngineFailure(UNDRIVABLE, self.step, what, str(e))) from None
        except ImportError as e:
            if (e.name or "").partition(".")[0] == "schedcheck":  # ours, never the engine's
                raise CheckerError(
                    f"schedcheck's own module {e.name} could not be imported where the engine "
                    f"ran ({what}, step {self.step}): it was not read before the box"
                ) from None
            message = describe(e, None, self.driver.source)
            raise Stop(EngineFailure("E6", self.step, what, message)) from None
        except BaseException as e:
            message = describe(e, None, self.driver.source)
            raise Stop(EngineFailure("E6", self.step, what, message)) from None

    def read(self, what: str, fn: Callable[[], _T]) -> _T:
        """A reading of the engine's state: one that fails is no verdict on the engine."""
        assert self.driver is not None
        try:
            return fn()
        except Stop:
            raise
        except Exception as e:
            message = self.driver.unreadable(e)
            raise Stop(EngineFailure(UNDRIVABLE, self.step, what, message)) from None

    def play(self, driver: Driver) -> EngineTrace:
        """The whole run, to its end or its failure, as a trace."""
        self.driver = driver
        try:
            self._loop(driver)
            outputs = driver.outputs()
        except Stop as stop:
            return EngineTrace(self.workload, self.traits, tuple(self.steps), failure=stop.failure)
        finally:
            self.driver = None  # the driver holds this run: no cycle outlives it
        return EngineTrace(self.workload, self.traits, tuple(self.steps), outputs)

    def _loop(self, driver: Driver) -> None:
        driver.start()
        requests = self.workload.requests
        pending = sorted(requests, key=lambda r: r.arrival)
        added: set[str] = set()
        limit = bound(self.workload)
        last_event = max(
            [r.arrival for r in requests]
            + [r.abort for r in requests]
            + [r.closed_at for r in requests]
            + [*self.workload.resets],
            default=0,
        )
        while True:
            self.step += 1
            while pending and pending[0].arrival <= self.step:
                request = pending.pop(0)
                driver.add(request)
                added.add(request.name)
            for request in requests:
                if request.name not in added:
                    continue
                for step, chunk in request.sends():  # a chunk before its close
                    if step != self.step:
                        continue
                    if chunk is None:
                        driver.close_session(request)
                    else:
                        driver.send_chunk(request, chunk)
                if request.abort == self.step:
                    driver.abort(request)
            if self.step in self.workload.resets:
                driver.reset()
            # a session whose client has more to send waits for it, not for the engine
            awaiting = {r.name for r in requests if r.session and r.closed_at > self.step}
            if driver.idle():
                lost = [n for n in driver.lost() if n not in awaiting]
                if lost:
                    raise Stop(
                        EngineFailure(
                            "E5",
                            self.step,
                            driver.idle_call,
                            f"{', '.join(lost)} not finished, but the scheduler counts no "
                            "unfinished request: lost from its queues, never to run",
                        )
                    )
                if not pending and not awaiting:
                    return
                continue  # idle until the next arrival, chunk or close
            if self.step > limit:
                raise Stop(
                    EngineFailure(
                        "E5",
                        self.step,
                        "end of run",
                        f"{', '.join(driver.unfinished())} not finished after {limit} steps "
                        "(the bound for this workload)",
                    )
                )
            settled = self.steps[-1].after_postprocess if self.steps else None
            driver.step()
            # Stuck: an empty step that changed nothing, so the next is the same. An empty
            # step that changed the state is not (a preemption that freed blocks lets the
            # next step go on); the bound above still catches a livelock.
            # (An engine core that overlaps steps may take an empty one to tell its runner
            # of requests just finished, with none left: that is not stuck.)
            done = self.steps[-1]
            if (
                driver.stuck_is_e5
                and not done.scheduled
                and self.step >= last_event
                and done.after_postprocess == settled  # a pool's equality is not cheap
                and driver.unfinished()
                and not driver.transferring()
            ):
                raise Stop(
                    EngineFailure(
                        "E5",
                        self.step,
                        "schedule()",
                        f"nothing scheduled while {', '.join(driver.unfinished())} "
                        "wait (unfinished, nothing more to arrive): the scheduler is stuck",
                    )
                )
