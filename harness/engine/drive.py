"""Drive an engine through a workload with a simulated model runner; copy plain values out.

Each step: add the requests arriving now, `schedule()`, copy out what the model runner
would read (and each scheduled sequence's pickled copy, what nano-vllm's tensor-parallel
workers receive), sample one token per scheduled sequence from the workload's token
function over the tokens it computes up to, `postprocess()`, copy the pool out again.
The checks (invariants/engine/) run on the trace afterwards, in a process the engine
cannot touch when it runs isolated.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from harness.drive.driver import describe
from harness.engine import copyout
from harness.engine.loader import Config, Engine
from invariants.engine.trace import (
    Copy,
    EngineFailure,
    EngineStep,
    EngineTrace,
    Pool,
    Scheduled,
)
from invariants.engine.workload import EOS, EngineRequest, EngineWorkload

_T = TypeVar("_T")


class Stop(Exception):
    def __init__(self, failure: EngineFailure) -> None:
        self.failure = failure


def generation(engine: Engine) -> str:
    """ "chunked" when postprocess() takes is_prefill (April 2026 on), else "whole"."""
    params = inspect.signature(engine.Scheduler.postprocess).parameters
    return "chunked" if len(params) >= 4 else "whole"


def bound(workload: EngineWorkload) -> int:
    """Steps within which every request must finish (E5): generous, since recompute
    preemption may redo a request's tokens once for every other request."""
    tokens = sum(len(r.prompt) + r.max_tokens for r in workload.requests)
    last = max((r.arrival for r in workload.requests), default=0)
    return last + tokens * (len(workload.requests) + 1) + 8


def run_engine(
    engine: Engine, workload: EngineWorkload, beat: Callable[[int, str], None] | None = None
) -> EngineTrace:
    """Drive `workload` through `engine`; `beat(step, call)` before every call into it (the
    isolated worker's heartbeat, so that a call that hangs is told from a long run)."""
    run = _Run(engine, workload, beat)
    try:
        run.all_steps()
    except Stop as stop:
        return EngineTrace(workload, run.generation, tuple(run.steps), failure=stop.failure)
    return EngineTrace(workload, run.generation, tuple(run.steps), run.outputs())


class _Run:
    def __init__(
        self, engine: Engine, workload: EngineWorkload, beat: Callable[[int, str], None] | None
    ) -> None:
        self.engine, self.workload, self.beat = engine, workload, beat
        self.generation = generation(engine)
        self.seqs: dict[str, Any] = {}  # name -> the engine's Sequence
        self.names: dict[int, str] = {}  # id(Sequence) -> name
        self.steps: list[EngineStep] = []
        self.step = 0

    def call(self, what: str, fn: Callable[[], _T]) -> _T:
        if self.beat is not None:
            self.beat(self.step, what)
        try:
            return fn()
        except Stop:
            raise
        except BaseException as e:  # SystemExit too: the engine must not end the run
            message = describe(e, None, str(self.engine.root))
            raise Stop(EngineFailure("E6", self.step, what, message)) from None

    def all_steps(self) -> None:
        c = self.workload.config
        config = Config(
            max_num_seqs=c.max_num_seqs,
            max_num_batched_tokens=c.max_num_batched_tokens,
            eos=EOS,
            kvcache_block_size=c.block_size,
            num_kvcache_blocks=c.num_blocks,
        )
        self.engine.Sequence.block_size = c.block_size
        self.scheduler = self.call("Scheduler()", lambda: self.engine.Scheduler(config))
        pending = sorted(self.workload.requests, key=lambda r: r.arrival)
        limit = bound(self.workload)
        while True:
            self.step += 1
            while pending and pending[0].arrival <= self.step:
                self.add(pending.pop(0))
            if self.call("is_finished()", lambda: bool(self.scheduler.is_finished())):
                if not pending:
                    return
                continue  # idle until the next arrival
            if self.step > limit:
                left = [n for n, s in self.seqs.items() if copyout.status(s) != "FINISHED"]
                raise Stop(
                    EngineFailure(
                        "E5",
                        self.step,
                        "end of run",
                        f"{', '.join(left)} not finished after {limit} steps "
                        "(the bound for this workload)",
                    )
                )
            self.one_step()

    def add(self, request: EngineRequest) -> None:
        params = self.call(
            "SamplingParams()",
            lambda: self.engine.SamplingParams(
                temperature=1.0, max_tokens=request.max_tokens, ignore_eos=request.ignore_eos
            ),
        )
        seq = self.call("Sequence()", lambda: self.engine.Sequence(list(request.prompt), params))
        self.seqs[request.name], self.names[id(seq)] = seq, request.name
        self.call("add()", lambda: self.scheduler.add(seq))

    def one_step(self) -> None:
        got = self.call("schedule()", self.scheduler.schedule)
        seqs, is_prefill = self.read("schedule()", lambda: _returned(got, self.names))
        views = self.read("schedule()", lambda: tuple(self.view(s, is_prefill) for s in seqs))
        copies = tuple(self.copy(s, view) for s, view in zip(seqs, views, strict=True))
        before = self.read("schedule()", self.pool)
        sampled = tuple(
            self.workload.next_token(v.token_ids[: v.num_cached + v.num_scheduled]) for v in views
        )
        record = EngineStep(self.step, is_prefill, views, copies, sampled, before, None)
        self.steps.append(record)
        if self.generation == "chunked":
            self.call(
                "postprocess()", lambda: self.scheduler.postprocess(seqs, list(sampled), is_prefill)
            )
        else:
            self.call("postprocess()", lambda: self.scheduler.postprocess(seqs, list(sampled)))
        after = self.read("postprocess()", self.pool)
        self.steps[-1] = EngineStep(self.step, is_prefill, views, copies, sampled, before, after)

    def read(self, call: str, fn: Callable[[], _T]) -> _T:
        """Copy values out of the engine; what cannot be read is the engine's fault (E6)."""
        try:
            return fn()
        except Stop:
            raise
        except Exception as e:
            raise Stop(
                EngineFailure(
                    "E6", self.step, call, f"its state could not be read as nano-vllm's: {e!r}"
                )
            ) from None

    def copy(self, seq: Any, view: Scheduled) -> Copy:
        if self.beat is not None:
            self.beat(self.step, "pickle")
        try:
            return copyout.pickled(seq, self.generation)
        except BaseException as e:  # its __getstate__ is its code: SystemExit included
            message = f"{view.name} cannot be pickled: {e!r}"
            raise Stop(EngineFailure("E8", self.step, "pickle", message)) from None

    def view(self, seq: Any, is_prefill: bool) -> Scheduled:
        return copyout.scheduled(seq, self.names[id(seq)], self.generation, is_prefill)

    def pool(self) -> Pool:
        return copyout.pool(self.scheduler.block_manager, self.seqs)

    def outputs(self) -> dict[str, tuple[int, ...]]:
        return self.read("end of run", lambda: copyout.outputs(self.seqs, self.workload))


def _returned(got: Any, names: dict[int, str]) -> tuple[list[Any], bool]:
    seqs, is_prefill = got
    seqs = list(seqs)
    unknown = [s for s in seqs if id(s) not in names]
    if unknown:
        raise ValueError(f"schedule() returned an object that was never added: {unknown[0]!r}")
    return seqs, bool(is_prefill)
