"""The toy engine's adapter (engine.py beside it): all that `schedcheck engine --engine toy`
needs to drive an engine of this shape, none of it in schedcheck's core. PATH is a Python
file defining `Engine` (engine.py, or a mutant of it)."""

from __future__ import annotations

import argparse
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from schedcheck import faults
from schedcheck.engine.adapter import PLAIN, EngineSetup, SetupError
from schedcheck.engine.export import Rendered
from schedcheck.engine.run import Run, bound
from schedcheck.engine.runner import Runner
from schedcheck.engine.trace import Block, EngineStep, EngineTrace, Pool, Scheduled
from schedcheck.engine.traits import Traits
from schedcheck.engine.workload import EOS, EngineRequest, EngineWorkload
from schedcheck.sandbox.process import DEFAULT_MEMORY_MB

TRAITS = Traits(
    Runner(
        "toy",
        "start",
        "count",
        "count",
        False,
        "mixed",
        "the toy engine's own: each slice computes positions start .. start + count - 1 "
        "through its pages",
    ),
    update_call="commit()",
)
STATES = {"waiting": "WAITING", "running": "RUNNING", "done": "FINISHED"}


def engine_class(path: str, source: str) -> Any:
    """The file's `Engine`, its module executed from `source` (read before any box)."""
    module = types.ModuleType(f"toy_{Path(path).stem}")
    module.__file__ = path
    sys.modules[module.__name__] = module  # dataclasses look their module up there
    exec(compile(source, path, "exec"), module.__dict__)
    return module.Engine


class ToyDriver:
    undrivable: tuple[type[BaseException], ...] = ()
    idle_call = "busy()"
    stuck_is_e5 = True

    def __init__(self, cls: Any, run: Run, source: str) -> None:
        self.cls, self.run, self.source = cls, run, source
        self.added: list[str] = []

    def start(self) -> None:
        c = self.run.workload.config
        self.engine = self.run.call(
            "Engine()",
            lambda: self.cls(
                c.num_blocks, c.block_size, c.max_num_seqs, c.max_num_batched_tokens, EOS
            ),
        )

    def add(self, request: EngineRequest) -> None:
        prompt, stop = list(request.prompt), not request.ignore_eos
        self.run.call(
            "submit()", lambda: self.engine.submit(request.name, prompt, request.max_tokens, stop)
        )
        self.added.append(request.name)

    def abort(self, request: EngineRequest) -> None:
        """The toy has no abort; its features say so, and no workload of its has one."""

    def reset(self) -> None:
        """The toy has no prefix-cache reset; its features say so, and no workload of its
        has one."""

    def idle(self) -> bool:
        return not self.run.call("busy()", lambda: bool(self.engine.busy()))

    def lost(self) -> list[str]:
        return self.unfinished()

    def unfinished(self) -> list[str]:
        states = self.run.read("busy()", lambda: {r: self.engine.jobs[r].state for r in self.added})
        return [r for r, state in states.items() if state != "done"]

    def step(self) -> None:
        run = self.run
        slices = run.call("plan()", self.engine.plan)
        views = run.read("plan()", lambda: tuple(self.view(s) for s in slices))
        before = run.read("plan()", self.pool)
        sampled = tuple(
            run.workload.next_token(v.token_ids[: v.num_cached + v.num_scheduled]) for v in views
        )
        is_prefill = any(v.num_cached + v.num_scheduled < len(v.token_ids) for v in views)
        run.steps.append(EngineStep(run.step, is_prefill, views, (), sampled, before, None))
        ended = {
            v.name: token
            for v, token in zip(views, sampled, strict=True)
            if v.num_cached + v.num_scheduled == len(v.token_ids)
        }
        run.call("commit()", lambda: self.engine.commit(ended))
        after = run.read("commit()", self.pool)
        run.steps[-1] = EngineStep(run.step, is_prefill, views, (), sampled, before, after)

    def view(self, piece: Any) -> Scheduled:
        tokens = tuple(self.engine.jobs[piece.rid].tokens)
        return Scheduled(piece.rid, piece.start, piece.count, tokens, tuple(piece.pages))

    def pool(self) -> Pool:
        engine, jobs = self.engine, self.engine.jobs
        return Pool(
            tuple(Block(ref, 0, ()) for ref in engine.refs),
            tuple(engine.free),
            tuple(sorted(p for p, ref in enumerate(engine.refs) if ref > 0)),
            {r: tuple(jobs[r].pages) for r in self.added},
            {r: tuple(jobs[r].tokens) for r in self.added},
            {r: STATES[jobs[r].state] for r in self.added},
        )

    def unreadable(self, error: Exception) -> str:
        return f"the toy engine's state could not be read: {error!r}"

    def outputs(self) -> dict[str, tuple[int, ...]]:
        jobs = self.engine.jobs
        return self.run.read("end of run", lambda: {r: tuple(jobs[r].output) for r in self.added})


class _Loaded:
    def __init__(self, cls: Any, path: str) -> None:
        self.cls, self.path = cls, path

    def run(
        self, workload: EngineWorkload, setup: EngineSetup, beat: Callable[[int, str], None] | None
    ) -> EngineTrace:
        run = Run(workload, TRAITS, beat)
        return run.play(ToyDriver(self.cls, run, self.path))


class Toy:
    name = "toy"
    title = "the toy engine"
    features = PLAIN
    policies_on: frozenset[str] = frozenset()
    options: frozenset[str] = frozenset()
    memory_mb = DEFAULT_MEMORY_MB
    start_timeout = 0.0
    worker = "tests.engine_subjects.toy.worker"
    # imported before the box: a mutant subclasses the correct engine
    preload: tuple[str, ...] = ("tests.engine_subjects.toy.engine",)

    def setup(self, path: str | None, args: argparse.Namespace) -> EngineSetup:
        if path is None or not Path(path).is_file():
            raise SetupError(f"{path}: the toy engine is a Python file defining Engine")
        where = Path(path).resolve()
        return EngineSetup(str(where.parent), where.name, "toy", "its own", config_from="none")

    def traits(self, setup: EngineSetup) -> Traits:
        return TRAITS

    def shown(self, setup: EngineSetup) -> str:
        return str(setup.folder)

    def header(self, setup: EngineSetup) -> list[str]:
        return [f"runner: {TRAITS.runner.source}"]

    def box(self, setup: EngineSetup, scratch: Path) -> Path:
        return setup.folder  # the file: the box holds a copy of it

    def calls(self, workload: EngineWorkload) -> int:
        """Engine(); submit() per request; busy(), plan() and commit() per step."""
        return 1 + len(workload.requests) + (bound(workload) + 2) * 3

    def before_box(self, path: str) -> str:
        return Path(path).read_text()

    def in_box(self, path: str, read: str) -> _Loaded:
        return _Loaded(engine_class(path, read), path)

    def load(self, setup: EngineSetup) -> _Loaded:
        path = str(setup.folder)
        return _Loaded(engine_class(path, Path(path).read_text()), path)

    def prefill(self, probe: Callable[[], bool], asked: str | None) -> tuple[bool, str | None]:
        return True, None  # it chunks every prefill under its budget

    def not_loaded(self, shown: str, message: str) -> int:
        print(f"FAIL {shown}: E6: the engine raised while it was loaded: {message}")
        return faults.FAIL

    def undrivable(self, setup: EngineSetup, why: str) -> str:
        return f"{self.shown(setup)} cannot be driven: {why}"

    def render(self, setup: EngineSetup, trace: EngineTrace) -> Rendered | str:
        """Its calls in an exported test: the file's Engine, by its module's name."""
        c = trace.workload.config
        sizes = f"{c.num_blocks}, {c.block_size}, {c.max_num_seqs}, {c.max_num_batched_tokens}"
        return Rendered(
            engine=f"the toy engine ({setup.package}, beside this test or on sys.path)",
            imports=f"from {Path(setup.package).stem} import Engine",
            build_body=f"return Engine({sizes}, {EOS})",
            add_body="engine.submit(name, list(prompt), max_tokens, not ignore_eos)\nreturn name",
            step_body=(
                "ended = {}\n"
                "for piece in engine.plan():\n"
                "    tokens = tuple(engine.jobs[piece.rid].tokens)\n"
                "    if piece.start + piece.count == len(tokens):\n"
                "        ended[piece.rid] = NEXT[tokens]\n"
                "engine.commit(ended)"
            ),
            pool_body=(
                "return {\n"
                '    "blocks": list(engine.refs),\n'
                '    "free": list(engine.free),\n'
                '    "used": [page for page, refs in enumerate(engine.refs) if refs > 0],\n'
                '    "tables": {name: list(engine.jobs[name].pages) for name in requests},\n'
                "}"
            ),
            done_body="return not engine.busy()",
            outputs_body="return {name: list(engine.jobs[name].output) for name in requests}",
        )

    def settle(
        self, setup: EngineSetup, run: Callable[[EngineWorkload], EngineTrace]
    ) -> EngineSetup:
        return setup  # its setup is decided from its release and the command line alone


ADAPTER = Toy()
