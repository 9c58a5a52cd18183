"""vLLM's v1 scheduler and KV cache manager as an engine (docs/engines.md, "vLLM"): its own
`Scheduler` built on the CPU from a config with no model weights (build.py), warmed up and
driven step by step with the simulated model runner and token function (drive.py), its
state copied out into the trace the core checks read."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from schedcheck import faults
from schedcheck.engine.adapter import EngineSetup, Features
from schedcheck.engine.export import Rendered
from schedcheck.engine.layers import KINDS
from schedcheck.engine.run import bound
from schedcheck.engine.trace import UNDRIVABLE, EngineTrace
from schedcheck.engine.traits import Traits
from schedcheck.engine.vllm.build import Build
from schedcheck.engine.vllm.config import vllm_setup
from schedcheck.engine.vllm.drive import RUNNER, TRAITS, Core, drafting, run_vllm, warm
from schedcheck.engine.vllm.export import render
from schedcheck.engine.vllm.modes import Mode
from schedcheck.engine.worker import LoadError
from schedcheck.engine.workload import CONNECTORS, DRAFTERS, LOAD_FAILURES, EngineWorkload

__all__ = ["ADAPTER", "Vllm"]

SETUP_FILE = "vllm-setup.json"  # its worker's PATH: where to import vLLM from


class _Built:
    """vLLM imported, configured and warmed up, in the process that drives it."""

    def __init__(self, build: Build) -> None:
        self.build = build

    def run(
        self, workload: EngineWorkload, setup: EngineSetup, beat: Callable[[int, str], None] | None
    ) -> EngineTrace:
        """In the workload's mode, or where it names none the first of the setup's."""
        core = Core(
            bool(setup.config.get("looks_at_device", False)),
            bool(setup.config.get("eager_aborts", False)),
            bool(setup.config.get("every_draft", False)),
        )
        return run_vllm(self.build, workload, Mode.parse(setup.modes[0]), core, beat)


def cache_root() -> Path:
    """Where vLLM keeps what it learnt of the model (its class inspected in a subprocess,
    seconds): shared by this user's workers."""
    return Path(tempfile.gettempdir()) / f"schedcheck-vllm-{os.getuid()}"


def built(
    root: str, modes: list[Mode], connectors: tuple[str, ...] = (), sessions: bool = False
) -> Build:
    """vLLM from `root` imported, configured for a model of no weights and warmed up in each
    of `modes` (with each of `connectors`): its lazy imports happen now, and a release this
    driver cannot drive is told now (RuntimeError). The model's folder is read by then and
    removed."""
    if root not in sys.path:
        sys.path.insert(0, root)
    folder = Path(tempfile.mkdtemp(prefix="schedcheck-vllm-"))
    os.environ.setdefault("VLLM_CACHE_ROOT", str(cache_root()))
    try:
        build = Build(folder)
        warm(build, modes, connectors, sessions)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return build


class Vllm:
    name = "vllm"
    title = "vLLM"
    # its priority policy, stop tokens and aborts; decodes long enough to preempt, pools
    # tighter (its requests run together from the first step), and its null block
    features = Features(
        priorities=True,
        stops=True,
        aborts=True,
        max_tokens=8,
        pool_slack=3,
        reserved=1,
        resets=True,
        caps=True,
        timing=True,
        drafts=4,  # num_speculative_tokens 1 to 4 (--features spec), in every mode
        drafters=tuple((kind, ()) for kind in DRAFTERS),  # as its release has them: settle
        draft_schedules=True,  # num_speculative_tokens_per_batch_size, where it has it: settle
        connectors=tuple(CONNECTORS),  # as its release has them (--features connector)
        load_failures=LOAD_FAILURES,
        sessions=2,  # where its release has them (--features sessions)
        # requests under cache salts (`cache_salt`) and LoRA adapters (`lora_request`, a
        # server of `max_loras`), one workload in three each
        namespaces=True,
        adapters=True,
        layers=KINDS,  # a window, a chunk or a Mamba layer beside full attention
        # VllmConfig turns the hybrid manager off for chunked local attention with EAGLE
        # (`uses_target_hidden_states`; 0.26's manager asserts it unsupported)
        apart=(("chunk", "hidden"),),
    )
    # its running cap, its preemption rules, its running requests scheduled first
    policies_on = frozenset({"E9", "E10", "E13", "E15", "E16", "E17"})
    # its config is built from each workload; its modes from the release's and these
    options = frozenset({"runner", "async_scheduling", "modes"})
    memory_mb = 8192  # torch and vLLM map gigabytes of address space before a step is run
    start_timeout = 300.0  # to import vLLM and configure it (the first time, a model inspection)
    worker = "schedcheck.engine.vllm.worker"
    preload: tuple[str, ...] = ()

    def setup(self, path: str | None, args: argparse.Namespace) -> EngineSetup:
        return vllm_setup(path, args)

    def traits(self, setup: EngineSetup) -> Traits:
        return TRAITS

    def shown(self, setup: EngineSetup) -> str:
        return f"vLLM at {setup.root}"

    def header(self, setup: EngineSetup) -> list[str]:
        """Which modes this run checks, and whether each is the release's default."""
        modes = [Mode.parse(m) for m in setup.modes]
        overlap = setup.config["async_default"]
        protocol = setup.config["protocol_default"]

        def said(value: str, default: bool) -> str:
            return f"{value} ({'release default' if default else 'chosen'})"

        schedulings = dict.fromkeys("on" if m.overlapped else "off" for m in modes)
        protocols = dict.fromkeys(m.protocol for m in modes)
        lines = [
            "async: " + ", ".join(said(a, (a == "on") == overlap) for a in schedulings),
            "runner: " + ", ".join(said(p, p == protocol) for p in protocols),
        ]
        if len(modes) > 1:
            lines.append(f"modes: {', '.join(setup.modes)} (drawn per workload)")
        if any(m.overlapped for m in modes):
            lines.append(
                "engine core: a batch queue of 2; "
                + (
                    "a batch the device finished before the core looked is updated at once (drawn)"
                    if setup.config.get("looks_at_device")
                    else "a batch is held while there is more to schedule"
                )
            )
        return [
            *lines,
            f"config: {setup.config_from}",
            f"positions: {RUNNER.source}: {RUNNER.describe()}",
            *(f"trial runs: {said}" for said in setup.settled),
        ]

    def box(self, setup: EngineSetup, scratch: Path) -> Path:
        path = scratch / SETUP_FILE
        modes = list(dict.fromkeys([*setup.modes, *setup.draft_modes]))
        connectors = list(setup.connectors)
        path.write_text(
            json.dumps(
                {
                    "root": setup.root,
                    "modes": modes,
                    "connectors": connectors,
                    "sessions": setup.sessions,
                }
            )
        )
        return path

    def calls(self, workload: EngineWorkload) -> int:
        """Scheduler(); Request(), add_request() and an abort per request; a reset where the
        workload has one; per step a count, has_requests() twice, schedule() and
        update_from_output(), up to the bound."""
        per_step = 6 if workload.drafts else 5  # and update_draft_token_ids()
        return (
            1 + 3 * len(workload.requests) + len(workload.resets) + (bound(workload) + 2) * per_step
        )

    def before_box(self, path: str) -> Build | LoadError:
        """Everything vLLM reads from disk (its modules, the model's config.json, its lazy
        imports) is read now: after the box, its own /tmp hides the machine's files and its
        uid may read nothing new."""
        try:
            read = json.loads(Path(path).read_text())
            modes = [Mode.parse(m) for m in read["modes"]]
            connectors = tuple(read.get("connectors", ()))
            return built(read["root"], modes, connectors, bool(read.get("sessions")))
        except (Exception, SystemExit) as e:  # vLLM's import or our warm-up on it: not ours
            return LoadError(f"{type(e).__name__}: {e}")

    def in_box(self, path: str, read: Build) -> _Built:
        return _Built(read)

    def load(self, setup: EngineSetup) -> _Built:
        modes = dict.fromkeys([*setup.modes, *setup.draft_modes])  # warmed in each
        parsed = [Mode.parse(m) for m in modes]
        return _Built(built(setup.root, parsed, setup.connectors, setup.sessions))

    def prefill(self, probe: Callable[[], bool], asked: str | None) -> tuple[bool, str | None]:
        return True, None  # chunked prefill is on in every config it is built with

    def not_loaded(self, shown: str, message: str) -> int:
        """Not installed whole, or a release this driver cannot drive: the user's to fix."""
        print(
            f"schedcheck engine: {shown} could not be imported and configured here: {message}",
            file=sys.stderr,
        )
        return faults.USAGE

    def undrivable(self, setup: EngineSetup, why: str) -> str:
        return f"{self.shown(setup)} cannot be driven: {why}"

    def render(self, setup: EngineSetup, trace: EngineTrace) -> Rendered | str:
        return render(setup, trace)

    def settle(
        self, setup: EngineSetup, run: Callable[[EngineWorkload], EngineTrace]
    ) -> EngineSetup:
        """Which drafters the release runs, in which of the run's draft modes: a trial run
        of each (a drafter whose method the release's SpeculativeConfig refuses, or whose
        config refuses async scheduling, is undrivable there: Build.speculative,
        Build.runs_async). The rest of its setup is decided from its release and the
        command line alone."""
        if not setup.draft_modes:
            return setup
        drafters: list[tuple[str, tuple[str, ...]]] = []
        said: list[str] = []
        for kind in DRAFTERS:
            runs, why = [], dict[str, list[str]]()  # the modes refused, by the reason
            for mode in setup.draft_modes:
                failure = run(drafting(kind, mode)).failure
                if failure is not None and failure.check == UNDRIVABLE:
                    why.setdefault(failure.message, []).append(mode)
                else:
                    runs.append(mode)
            if runs:
                every = len(runs) == len(setup.draft_modes)
                drafters.append((kind, () if every else tuple(runs)))
            said.extend(
                f"drafter {kind} not run in {', '.join(modes)}: {message}"
                for message, modes in why.items()
            )
        if not drafters:  # no drafter runs here: speculative decoding is not drawn
            lacks = (*setup.lacks, "drafts")
            return replace(setup, draft_modes=(), lacks=lacks, settled=(*setup.settled, *said))
        # dynamic draft lengths, where its SpeculativeConfig takes a schedule (0.33 on)
        kind, modes = drafters[0]
        first = (modes or setup.draft_modes)[0]
        dynamic = replace(drafting(kind, first), draft_schedule=DYNAMIC)
        failure = run(dynamic).failure
        lacks = setup.lacks
        if failure is not None and failure.check == UNDRIVABLE:
            lacks = (*lacks, "draft_schedules")
            said.append(f"no dynamic draft lengths: {failure.message}")
        return replace(
            setup, drafters=tuple(drafters), lacks=lacks, settled=(*setup.settled, *said)
        )


DYNAMIC = ((1, 1, 2), (2, 8, 1))  # a trial's draft schedule: 2 drafts alone, 1 beside others


ADAPTER = Vllm()
