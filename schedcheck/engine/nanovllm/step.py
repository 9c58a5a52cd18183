"""Drive a nano-vllm fork through its own engine step (docs/engines.md, "nano-vllm's own
step"): each workload builds the fork's `LLMEngine` (build.py), adds each request through
its `add_request()`, and steps it with its own `step()`, whatever its scheduler returns and
whichever of its runner's methods that step calls. schedcheck sees a step through the
simulated model (model.py): the rows each forward computed, the KV cache each read, the
worker ranks' inputs; and through the pool, copied out when the step's first forward runs
(after the scheduling) and after the step (after the update).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schedcheck.drive.driver import describe
from schedcheck.engine.nanovllm import copyout
from schedcheck.engine.nanovllm.build import Built, Package, build, unset_by_us
from schedcheck.engine.nanovllm.config import NOT_RUN
from schedcheck.engine.nanovllm.drive import sampling_params
from schedcheck.engine.nanovllm.generate import GenerateLoop, Returned, calls_is_finished
from schedcheck.engine.nanovllm.runners import OWN
from schedcheck.engine.run import PlainDriver, Run, Stop
from schedcheck.engine.trace import UNDRIVABLE, EngineFailure, EngineStep, EngineTrace, Pool
from schedcheck.engine.traits import Traits
from schedcheck.engine.workload import EngineRequest, EngineWorkload

__all__ = ["TRAITS", "run_own_step"]

TRAITS = Traits(OWN)


class Unbuilt(Exception):
    """The fork's engine could not be built with schedcheck's stand-ins: no verdict."""


def run_own_step(
    package: Package,
    workload: EngineWorkload,
    config: dict[str, Any],
    beat: Callable[[int, str], None] | None = None,
) -> EngineTrace:
    run = Run(workload, TRAITS, beat)
    driver = OwnStepDriver(package, run, config)
    try:
        return run.play(driver)
    finally:
        driver.close()


class OwnStepDriver(PlainDriver):
    """One run of a fork's own LLMEngine."""

    undrivable: tuple[type[BaseException], ...] = (Unbuilt, Returned)
    idle_call = "is_finished()"
    stuck_is_e5 = False  # an idle engine is told by is_finished(): the bound decides

    def __init__(self, package: Package, run: Run, config: dict[str, Any]) -> None:
        self.package, self.run, self.workload, self.config = package, run, run.workload, config
        self.source = str(package.root)
        self.built: Built | None = None
        self.before: Pool | None = None  # the pool at this step's first forward
        self.misread: Exception | None = None
        self.loop: GenerateLoop | None = None
        self.finished: Any = None  # the engine's own is_finished()

    @property
    def engine(self) -> Built:
        assert self.built is not None
        return self.built

    def start(self) -> None:
        if self.package.SamplingParams is None:
            raise self._undrivable("LLMEngine()", "it has no sampling_params.py (SamplingParams)")
        self.built = self.run.call("LLMEngine()", self._build)
        self.built.forwards.first = self._at_first_forward
        engine = self.built.engine
        self.finished = engine.is_finished
        stepped = callable(getattr(engine, "step", None))
        # generate() on its thread where it is more than a loop of step() calls: where the
        # engine has no step(), or generate() sets state of its own (`self.X = ...`) that its
        # step may read; else its step(), called directly, takes the same iterations
        if calls_is_finished(engine) and (not stepped or self.package.generate_sets):
            loop = GenerateLoop(engine, lambda: self._params(EngineRequest("", (1,), 1)))
            if self.run.call("generate()", loop.start):
                self.loop = loop
                return
            del engine.is_finished  # its generate() never reached its loop: its step alone
        if not stepped:
            raise self._undrivable(
                "LLMEngine()",
                "its LLMEngine has no step(), and its generate() does not loop on "
                "self.is_finished(), where schedcheck would take each step",
            )

    def close(self) -> None:
        """Let generate() return (where it steps the engine)."""
        if self.loop is not None:
            self.loop.close()

    def _undrivable(self, call: str, message: str) -> Stop:
        return Stop(EngineFailure(UNDRIVABLE, self.run.step, call, message))

    def _params(self, request: EngineRequest) -> Any:
        return sampling_params(self.package.SamplingParams, request)

    def _build(self) -> Built:
        try:
            return build(self.package, self.workload, self.config)
        except Exception as e:
            raise Unbuilt(
                "its LLMEngine could not be built on a CPU with schedcheck's stand-ins "
                f'(docs/engines.md, "nano-vllm\'s own step"): {describe(e, None, self.source)}'
            ) from None

    def idle(self) -> bool:
        return self.run.call("is_finished()", lambda: bool(self.finished()))

    def lost(self) -> list[str]:
        return []

    def unfinished(self) -> list[str]:
        statuses = self.run.read(
            "end of run", lambda: {n: copyout.status(s) for n, s in self.engine.seqs.items()}
        )
        return [n for n, status in statuses.items() if status != "FINISHED"]

    def abort(self, request: EngineRequest) -> None:
        """nano-vllm has no abort (its adapter declares none)."""

    def reset(self) -> None:
        """nano-vllm has no prefix-cache reset (its adapter declares none)."""

    def add(self, request: EngineRequest) -> None:
        built, call = self.engine, self.run.call
        params = call("SamplingParams()", lambda: self._params(request))
        built.naming = request.name
        call("add_request()", lambda: self._add_request(request, params))
        if request.name not in built.seqs:
            raise Stop(
                EngineFailure(
                    UNDRIVABLE,
                    self.run.step,
                    "add_request()",
                    "its LLMEngine.add_request() gave its scheduler no sequence through "
                    "Scheduler.add(), where schedcheck learns each request's Sequence",
                )
            )

    def _one_step(self) -> None:
        """One iteration of its generate() loop (or its step()); an exception that is
        schedcheck's doing (unset_by_us) is no verdict."""
        try:
            if self.loop is not None:
                self.loop.advance()
            else:
                self.engine.engine.step()
        except Exception as e:
            # Its step() alone (no generate() loop driven) never has what generate() sets.
            not_run = NOT_RUN if self.loop is not None else (*NOT_RUN, "generate")
            ours = unset_by_us(self.package, e, not_run)
            if ours is not None and self.engine.forwards.problem is None:
                message = f"its step cannot run on a CPU with schedcheck's stand-ins: {ours}"
                raise Unbuilt(message) from None
            raise

    def _add_request(self, request: EngineRequest, params: Any) -> None:
        """Its add_request(); a ValueError there is its own admission rule refusing a request
        schedcheck deems feasible (its prompt and max_tokens - 1 tokens of KV fit the pool
        alone): input it does not take, no verdict."""
        try:
            self.engine.engine.add_request(list(request.prompt), params)
        except ValueError as e:
            raise Unbuilt(
                f"its add_request() refuses {request.name} (prompt of {len(request.prompt)}, "
                f"max_tokens {request.max_tokens}, a pool of {self.workload.config.num_blocks} "
                f"blocks of {self.workload.config.block_size}), which fits the pool by "
                f"schedcheck's rule: {describe(e, None, self.source)}"
            ) from None

    def _at_first_forward(self) -> None:
        try:
            self.before = self.pool()
        except Exception as e:  # read after the step: a reading that fails is no verdict
            self.misread = e

    def step(self) -> None:
        run, built = self.run, self.engine
        forwards = built.forwards
        forwards.begin(run.step)
        self.before, self.misread = None, None
        try:
            run.call("step()", self._one_step)
        except Stop as stop:
            if forwards.internal is not None:  # ours: no verdict (exit 3)
                raise forwards.internal from None
            self._record(None)
            raise Stop(forwards.problem or stop.failure) from None
        if forwards.internal is not None:
            raise forwards.internal
        if forwards.problem is not None:  # the engine caught the model's exception
            self._record(None)
            raise Stop(forwards.problem)
        if self.misread is not None:
            raise Stop(EngineFailure(UNDRIVABLE, run.step, "step()", self.unreadable(self.misread)))
        after = run.read("step()", self.pool)
        self._record(after)
        if built.ranks.raised is not None:
            rank, what, error = built.ranks.raised
            ours = unset_by_us(self.package, error)
            if ours is not None:
                raise self._undrivable(
                    "model runner", f"its tensor-parallel rank {rank} cannot run here: {ours}"
                )
            said = f"tensor-parallel rank {rank} {what}"
            raise Stop(EngineFailure("E8", run.step, "model runner", said + self._why(rank)))
        differs = forwards.compare()
        if differs is not None:
            rank, said = differs
            raise Stop(EngineFailure("E8", run.step, "model runner", said + self._why(rank)))

    def _why(self, rank: int) -> str:
        """Why a worker computed otherwise than rank 0: its process state, where it differs
        (set after import in rank 0's process only), else what it was sent."""
        state = self.engine.ranks.differences(rank)
        if state:
            return (
                f"; its process holds {', '.join(state)}: set in rank 0's process after "
                "import, never in a spawned worker's"
            )
        return (
            ": what rank 0 sent it (the scheduled sequences through the engine's pickling "
            "and shared memory) does not carry what its runner reads, where rank 0 ran the "
            "same step on its own sequences"
        )

    def _record(self, after: Pool | None) -> None:
        forwards, run = self.engine.forwards, self.run
        before = self.before
        if before is None:
            before = after if after is not None else run.read("step()", self.pool)
        rows = tuple(forwards.rows)
        sampled = tuple(
            self.workload.next_token(r.token_ids[: r.num_cached + r.num_scheduled]) for r in rows
        )
        run.steps.append(EngineStep(run.step, forwards.prefill, rows, (), sampled, before, after))

    def pool(self) -> Pool:
        return copyout.pool(self.engine.engine.scheduler.block_manager, self.engine.seqs)

    def unreadable(self, error: Exception) -> str:
        return copyout.unreadable(error)

    def outputs(self) -> dict[str, tuple[int, ...]]:
        return self.run.read("end of run", lambda: copyout.outputs(self.engine.seqs, self.workload))
