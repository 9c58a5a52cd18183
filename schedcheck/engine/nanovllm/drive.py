"""Drive a nano-vllm engine through a workload with a simulated model runner; copy plain values out.

Each step: add the requests arriving now, `schedule()`, copy out what the model runner
would read (and each scheduled sequence's pickled copy, what nano-vllm's tensor-parallel
workers receive), sample one token per scheduled sequence from the workload's token
function over the tokens it computes up to, `postprocess()`, copy the pool out again.
The checks (engine/checks.py) run on the trace afterwards, in a process the engine
cannot touch when it runs isolated.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from schedcheck.engine.adapter import EngineSetup
from schedcheck.engine.nanovllm import copyout
from schedcheck.engine.nanovllm.config import ranks
from schedcheck.engine.nanovllm.loader import Config, ConfigUnset, Engine
from schedcheck.engine.nanovllm.runners import RUNNERS
from schedcheck.engine.run import PlainDriver, Run, Stop
from schedcheck.engine.runner import Runner
from schedcheck.engine.trace import (
    UNDRIVABLE,
    Copy,
    EngineFailure,
    EngineStep,
    EngineTrace,
    Pool,
    Scheduled,
)
from schedcheck.engine.traits import Traits
from schedcheck.engine.workload import EOS, EngineRequest, EngineWorkload

API = ("add", "schedule", "is_finished")  # what the driver calls on every Scheduler


class Eos(int):
    """The eos token id, which also answers `in` as the set of it: some forks' engines give
    the scheduler a set of stop ids in `config.eos` (brightmoonflame/nano-vllm-optimized's
    `token_id in self.eos`), nano-vllm an int (`token_id == self.eos`)."""

    def __contains__(self, token: object) -> bool:
        return token == int(self)

    def __iter__(self) -> Iterator[int]:
        yield int(self)


def sampling_params(make: Any, request: EngineRequest) -> Any:
    """The fork's SamplingParams for `request`: ignore_eos given where it takes it (a
    SamplingParams without it gets no request that ignores eos: EngineSetup.lacks)."""
    given: dict[str, Any] = {"temperature": 1.0, "max_tokens": request.max_tokens}
    if request.ignore_eos or "ignore_eos" not in _lacks(make):
        given["ignore_eos"] = request.ignore_eos
    return make(**given)


def _lacks(make: Any) -> tuple[str, ...]:
    try:
        parameters = inspect.signature(make).parameters
    except (TypeError, ValueError):
        return ()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return ()
    return () if "ignore_eos" in parameters else ("ignore_eos",)


def takes_is_prefill(engine: Engine) -> bool:
    """Whether postprocess() is called with is_prefill (nano-vllm from 8d63a98 on): by its
    signature, which says how to call it, not which runner the engine has."""
    try:
        params = list(inspect.signature(engine.Scheduler.postprocess).parameters.values())
    except (TypeError, ValueError, AttributeError):
        return True
    if any(p.kind is p.VAR_POSITIONAL for p in params) or any(
        p.name == "is_prefill" for p in params
    ):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 4  # self, seqs, token_ids, is_prefill


def run_engine(
    engine: Engine,
    workload: EngineWorkload,
    setup: EngineSetup,
    beat: Callable[[int, str], None] | None = None,
) -> EngineTrace:
    """Drive `workload` through `engine` as `setup` says; `beat(step, call)` before every
    call into it (the isolated worker's heartbeat, so that a call that hangs is told from a
    long run)."""
    run = Run(workload, traits_of(setup), beat)
    return run.play(NanoDriver(engine, run, setup))


def traits_of(setup: EngineSetup) -> Traits:
    """What a nano-vllm run declares: its generation's runner; a block's hash covers the
    block's own tokens (the chain is not checked as prefixes), and the step's second call
    is postprocess()."""
    return Traits(RUNNERS[setup.runner])


class NanoDriver(PlainDriver):
    """One run of a nano-vllm engine, its steps as its LLMEngine.step() takes them."""

    undrivable: tuple[type[BaseException], ...] = (ConfigUnset,)  # a Config value to give
    idle_call = "is_finished()"
    stuck_is_e5 = False  # an idle engine is told by is_finished(): the bound decides

    def __init__(self, engine: Engine, run: Run, setup: EngineSetup) -> None:
        self.engine, self.run, self.workload = engine, run, run.workload
        self.setup, self.runner = setup, run.traits.runner
        self.source = str(engine.root)
        self.with_is_prefill = takes_is_prefill(engine)
        # nano-vllm-voxcpm's shape: Sequence(seq_id, token_ids, block_size), no postprocess();
        # its engine loop appends each token and calls Scheduler.finish() on a stop.
        self.named_sequences = _first_parameter(engine.Sequence) == "seq_id"
        self.loop_finishes = not hasattr(engine.Scheduler, "postprocess") and callable(
            getattr(engine.Scheduler, "finish", None)
        )
        # It pickles its sequences to tensor-parallel workers where it has a form of its
        # own (__getstate__) and workers: not with `--config tensor_parallel_size=1`.
        own_form = any("__getstate__" in vars(k) for k in engine.Sequence.__mro__[:-1])
        self.pickles = own_form and ranks(setup) > 1
        self.requests = {r.name: r for r in self.workload.requests}
        self.seqs: dict[str, Any] = {}  # name -> the engine's Sequence
        self.names: dict[int, str] = {}  # id(Sequence) -> name

    def start(self) -> None:
        lacking = [
            f"Scheduler.{m}()" for m in API if not callable(getattr(self.engine.Scheduler, m, None))
        ]
        if not self.loop_finishes and not callable(
            getattr(self.engine.Scheduler, "postprocess", None)
        ):
            lacking.append("Scheduler.postprocess() (or finish())")
        if self.engine.SamplingParams is None and not self.named_sequences:
            lacking.append("sampling_params.py (SamplingParams)")
        if lacking:
            raise Stop(
                EngineFailure(
                    UNDRIVABLE,
                    0,
                    "Scheduler",
                    (
                        f"the engine's Scheduler has no {', '.join(lacking)}, which "
                        "schedcheck calls as "
                        'nano-vllm\'s (docs/engines.md, "Checking a fork")'
                    ),
                )
            )
        c = self.workload.config
        config = Config(
            **{
                **self.setup.config,
                "max_num_seqs": c.max_num_seqs,
                "max_num_batched_tokens": c.max_num_batched_tokens,
                "eos": Eos(EOS),
                "kvcache_block_size": c.block_size,
                "num_kvcache_blocks": c.num_blocks,
                "max_model_len": self.workload.longest(),
            }
        )
        self.engine.Sequence.block_size = c.block_size
        self.scheduler = self.run.call("Scheduler()", lambda: self.engine.Scheduler(config))

    def idle(self) -> bool:
        return self.run.call("is_finished()", lambda: bool(self.scheduler.is_finished()))

    def lost(self) -> list[str]:
        return []  # is_finished() reads its queues: a sequence lost from both is E7's to tell

    def unfinished(self) -> list[str]:
        statuses = self.run.read(
            "end of run", lambda: {n: copyout.status(s) for n, s in self.seqs.items()}
        )
        return [n for n, status in statuses.items() if status != "FINISHED"]

    def abort(self, request: EngineRequest) -> None:
        """nano-vllm has no abort (its adapter declares none: no workload of its has one)."""

    def reset(self) -> None:
        """nano-vllm has no prefix-cache reset (its adapter declares none: no workload of its
        has one)."""

    def add(self, request: EngineRequest) -> None:
        call = self.run.call
        if self.named_sequences:
            size, prompt = self.workload.config.block_size, list(request.prompt)
            seq = call("Sequence()", lambda: self.engine.Sequence(request.name, prompt, size))
            self.seqs[request.name], self.names[id(seq)] = seq, request.name
            call("add()", lambda: self.scheduler.add(seq))
            return
        params = call(
            "SamplingParams()",
            lambda: sampling_params(self.engine.SamplingParams, request),
        )
        seq = call("Sequence()", lambda: self.engine.Sequence(list(request.prompt), params))
        self.seqs[request.name], self.names[id(seq)] = seq, request.name
        call("add()", lambda: self.scheduler.add(seq))

    def step(self) -> None:
        run, call, read = self.run, self.run.call, self.run.read
        got = call("schedule()", self.scheduler.schedule)
        seqs, phase = read("schedule()", lambda: _returned(got, self.names, self.runner))
        views = read("schedule()", lambda: tuple(self.view(s, phase is not False) for s in seqs))
        # a mixed batch (schedule() returned only sequences) is a prefill step if any of its
        # sequences computes more than its last position
        is_prefill = (
            phase if phase is not None else any(v.num_cached < len(v.token_ids) - 1 for v in views)
        )
        # E8 only where the engine pickles its sequences to workers in a form of its own
        copies = tuple(self.copy(s, v) for s, v in zip(seqs, views, strict=True) if self.pickles)
        before = read("schedule()", self.pool)
        sampled = tuple(
            self.workload.next_token(v.token_ids[: v.num_cached + v.num_scheduled]) for v in views
        )
        run.steps.append(EngineStep(run.step, is_prefill, views, copies, sampled, before, None))
        if self.loop_finishes:
            self.engine_loop(seqs, sampled)
        elif phase is None:
            # vLLM v1's style: tokens only for the sequences whose every token is now computed
            # (their runner's seq_need_compute_logits), with those sequences' indices
            need = [
                i
                for i, v in enumerate(views)
                if v.num_cached + v.num_scheduled == len(v.token_ids) and v.block_table
            ]
            tokens = [sampled[i] for i in need]
            call("postprocess()", lambda: self.scheduler.postprocess(seqs, tokens, need))
        elif self.with_is_prefill:
            call(
                "postprocess()", lambda: self.scheduler.postprocess(seqs, list(sampled), is_prefill)
            )
        else:
            call("postprocess()", lambda: self.scheduler.postprocess(seqs, list(sampled)))
        after = read("postprocess()", self.pool)
        run.steps[-1] = EngineStep(run.step, is_prefill, views, copies, sampled, before, after)

    def engine_loop(self, seqs: list[Any], sampled: tuple[int, ...]) -> None:
        """What nano-vllm-voxcpm's LLMEngine.step does after the runner: append each token,
        then finish() the sequences that stopped (eos unless ignored, or max_tokens)."""
        stopped = [seq for seq, token in zip(seqs, sampled, strict=True) if self.append(seq, token)]
        for seq in stopped:
            self.run.call("finish()", partial(self.scheduler.finish, seq))

    def append(self, seq: Any, token: int) -> bool:
        """Append `token` to `seq` as the engine loop does; whether `seq` stopped."""
        self.run.call("append_token()", partial(seq.append_token, token))
        request = self.requests[self.names[id(seq)]]
        made = self.run.read("append_token()", partial(len, seq.token_ids)) - len(request.prompt)
        return (token == EOS and not request.ignore_eos) or made >= request.max_tokens

    def unreadable(self, error: Exception) -> str:
        """A field nano-vllm has and this engine lacks, or holds as something else, means it
        cannot be driven as nano-vllm's (exit 2, naming it): a reading of ours that fails is
        no verdict on the engine."""
        if isinstance(error, Shape):
            return str(error)
        return copyout.unreadable(error)

    def copy(self, seq: Any, view: Scheduled) -> Copy:
        if self.run.beat is not None:
            self.run.beat(self.run.step, "pickle")
        try:
            return copyout.pickled(seq, self.runner)
        except BaseException as e:  # its __getstate__ is its code: SystemExit included
            message = f"{view.name} cannot be pickled: {e!r}"
            raise Stop(EngineFailure("E8", self.run.step, "pickle", message)) from None

    def view(self, seq: Any, is_prefill: bool) -> Scheduled:
        return copyout.scheduled(seq, self.names[id(seq)], self.runner, is_prefill)

    def pool(self) -> Pool:
        return copyout.pool(self.scheduler.block_manager, self.seqs)

    def outputs(self) -> dict[str, tuple[int, ...]]:
        return self.run.read("end of run", lambda: copyout.outputs(self.seqs, self.workload))


def _first_parameter(cls: Any) -> str:
    try:
        names = list(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return ""
    return names[0] if names else ""


def _returned(got: Any, names: dict[int, str], runner: Runner) -> tuple[list[Any], bool | None]:
    """schedule()'s answer as (sequences, is_prefill): nano-vllm's `(seqs, is_prefill)`, with
    anything a fork adds after them, as a tuple or a list; or, where the runner computes
    mixed batches, only the sequences (is_prefill None)."""
    if isinstance(got, list) and all(id(s) in names for s in got):
        if runner.decode != "mixed":
            raise Shape(
                f"schedule() returned only sequences, {_shape(got)}: a mixed batch, "
                f"which runner {runner.name!r} does not compute (--runner mixed "
                "does)"
            )
        return list(got), None
    if not isinstance(got, (tuple, list)) or len(got) < 2 or not isinstance(got[1], bool):
        raise Shape(
            f"schedule() returned {_shape(got)}, not (sequences, is_prefill) as "
            "nano-vllm's does, nor a list of sequences (a mixed batch)"
        )
    seqs = list(got[0])
    unknown = [s for s in seqs if id(s) not in names]
    if unknown:
        raise ValueError(f"schedule() returned an object that was never added: {unknown[0]!r}")
    return seqs, got[1]


class Shape(Exception):
    """An answer of another shape than nano-vllm's: the engine cannot be driven as it is."""


def _shape(got: Any) -> str:
    if isinstance(got, (tuple, list)):
        return f"a {type(got).__name__} of {len(got)} ({', '.join(type(x).__name__ for x in got)})"
    return f"a {type(got).__name__}"
