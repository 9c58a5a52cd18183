"""Which vLLM to check, decided before anything of it runs: the installed release, or a
checkout (a folder holding `vllm/`, built or installed in editable mode), found without
importing it, as plain data for its worker."""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
from pathlib import Path

from schedcheck.engine.adapter import EngineSetup, SetupError, wants
from schedcheck.engine.layers import KINDS
from schedcheck.engine.strategies import EARLY, IN_FLIGHT_ABORT, IN_FLIGHT_PREEMPTION, SKIPPED
from schedcheck.engine.vllm.drive import RUNNER
from schedcheck.engine.vllm.modes import Mode, Release, release

EXTRA = "python -m pip install 'schedcheck[vllm]' (docs/engines.md, \"vLLM\")"
# what a run reaches where steps overlap (async scheduling)
OVERLAPPING = (IN_FLIGHT_PREEMPTION, IN_FLIGHT_ABORT)


def vllm_setup(path: str | None, args: argparse.Namespace | None = None) -> EngineSetup:
    """The setup for `schedcheck engine --engine vllm [PATH]`: where vLLM is, and the modes
    its runs draw from (--async, --runner, --modes over the release's defaults).
    SetupError (exit 2) when there is no vLLM there, or no such mode in it."""
    if path is None:
        spec = importlib.util.find_spec("vllm")
        if spec is None or not spec.submodule_search_locations:
            raise SetupError(f"vLLM is not installed here: {EXTRA}")
        root = Path(next(iter(spec.submodule_search_locations))).parent
        try:
            version = importlib.metadata.version("vllm")
        except importlib.metadata.PackageNotFoundError:
            version = "of unknown version"
        where = f"vLLM {version}, installed"
    else:
        root = Path(path).resolve()
        if not (root / "vllm" / "v1" / "core" / "sched" / "scheduler.py").is_file():
            raise SetupError(
                f"{path} holds no vLLM checkout (no vllm/v1/core/sched/scheduler.py): give "
                "the folder holding vllm/, or no PATH for the installed vLLM"
            )
        where = f"the vLLM checkout at {root}"
    has = release(root)
    modes, options = chosen(has, args)
    return EngineSetup(
        root=str(root),
        package="vllm",
        runner=RUNNER.name,
        runner_from="vLLM's own",
        config_from=f"{where}; SchedulerConfig and CacheConfig from each workload (chunked "
        "prefill and prefix caching on)",
        options=tuple(options),
        modes=tuple(m.name for m in modes),
        reaches=(
            SKIPPED,
            *(OVERLAPPING if any(m.overlapped for m in modes) else ()),
            # the device's timing is drawn for every release; it decides only where the
            # engine core looks at the device (0.11 to 0.2x)
            *((EARLY,) if has.looks_at_device and any(m.overlapped for m in modes) else ()),
        ),
        # speculative decoding is driven in every mode the release has (which drafters run
        # in each, its settle asks), the run's own first: where --features names it (its
        # worker warms up only the modes a run draws)
        draft_modes=tuple(
            sorted((m.name for m in has.modes()), key=lambda name: name != modes[0].name)
        )
        if wants("spec", getattr(args, "features", None))
        else (),
        # a KV connector (schedcheck's, over the simulated store) where the release
        # registers one by module path, and its own offloading connector where that speaks
        # the job protocol; each failure policy it has
        connectors=("simulated", *(("offloading",) if has.offloading else ()))
        if has.connectors and wants("connector", getattr(args, "features", None))
        else (),
        load_failures=("recompute", "fail") if has.load_failure_policy else (),
        sessions=has.sessions and wants("sessions", getattr(args, "features", None)),
        # hybrid models (a window or a chunk beside full attention) where its planner lays
        # them out
        layers=KINDS if has.hybrid and wants("hybrid", getattr(args, "features", None)) else (),
        state_budget=has.state_budget,
        config={
            "async_default": has.overlaps_by_default,
            "protocol_default": has.protocol_by_default,
            "looks_at_device": has.looks_at_device,
            "eager_aborts": has.eager_aborts,
            "every_draft": has.every_draft,
        },
    )


def chosen(has: Release, args: argparse.Namespace | None) -> tuple[list[Mode], list[str]]:
    """The modes the options select, the first the one a workload of no mode runs in, and
    the options that select them again."""
    scheduling = getattr(args, "async_scheduling", None)
    protocol = getattr(args, "runner", None)
    every = getattr(args, "modes", None) == "all"
    if scheduling == "on" and not has.overlaps:
        raise SetupError("--async on: this vLLM release has no async scheduling")
    if protocol is not None and protocol not in has.protocols:
        raise SetupError(
            f"--runner {protocol}: this vLLM release's scheduler speaks the model runner "
            f"protocol {' and '.join(has.protocols)} only"
        )
    wanted = Mode(
        has.overlaps_by_default if scheduling is None else scheduling == "on",
        protocol or has.protocol_by_default,
    )
    modes = [
        m
        for m in has.modes()
        if (every or m == wanted)
        and (scheduling is None or m.overlapped == (scheduling == "on"))
        and (protocol is None or m.protocol == protocol)
    ]
    modes.sort(key=lambda m: m != wanted)  # the one the options name first
    options = [
        *(["--async", scheduling] if scheduling else []),
        *(["--runner", protocol] if protocol else []),
        *(["--modes", "all"] if every else []),
    ]
    return modes, options
