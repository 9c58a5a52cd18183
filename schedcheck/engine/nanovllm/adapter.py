"""nano-vllm and its forks as an engine (docs/engines.md): a checkout's scheduling code
loaded without torch (loader.py), its Config and model runner read off its text
(config.py, runners.py), driven with a simulated model runner (drive.py), its state
copied out (copyout.py)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedcheck import faults
from schedcheck.drive.driver import describe
from schedcheck.engine.adapter import EngineSetup, Features
from schedcheck.engine.export import Rendered
from schedcheck.engine.nanovllm.build import WORLD, Package, load_package
from schedcheck.engine.nanovllm.config import (
    OWN_STEP,
    TORCH,
    given_config,
    loops_line,
    not_run,
    own_step,
    own_step_needs_torch,
    read_setup,
    runner_writes,
)
from schedcheck.engine.nanovllm.drive import run_engine, traits_of
from schedcheck.engine.nanovllm.export import render
from schedcheck.engine.nanovllm.loader import load_engine, preload_imports, read_sources
from schedcheck.engine.nanovllm.runners import RUNNERS
from schedcheck.engine.nanovllm.settle import settle
from schedcheck.engine.nanovllm.step import TRAITS as OWN_TRAITS
from schedcheck.engine.nanovllm.step import run_own_step
from schedcheck.engine.run import bound
from schedcheck.engine.trace import UNDRIVABLE, EngineFailure, EngineTrace
from schedcheck.engine.traits import Traits
from schedcheck.engine.workload import EngineWorkload

__all__ = ["ADAPTER", "NanoVllm"]

# What nano-vllm's scheduling modules import (xxhash and numpy when the extra is installed)
# and what the driver needs: after the privilege drop nothing new can be imported. The idna
# codec: a connection to "localhost" (a fork's rendezvous while it is built) encodes the
# name with it, imported on first use.
PRELOAD = ("array", "hashlib", "inspect", "pickle", "zlib", "xxhash", "numpy", "encodings.idna")


@dataclass(frozen=True)
class Read:
    """What the worker reads before its box: the package's sources, and whether its whole
    engine is to be imported (its own step can be driven here: torch imported already)."""

    sources: dict[str, str]
    whole: bool


class _InWorker:
    """The engine loaded inside its worker's box: for its own step where it can be, and as
    schedcheck's loop drives its Scheduler."""

    def __init__(self, root: str, read: Read, package: str) -> None:
        self.package: Package | None = None
        self.unloaded = ""
        if read.whole:
            try:
                self.package = load_package(root, read.sources, package)
            except Exception as e:  # its import: the own step cannot run, the other may
                self.unloaded = describe(e, None, root)
        self.engine: Any = None
        self.alone = ""  # why its scheduling code could not be loaded alone either
        if self.package is not None:
            self.engine = self.package.engine()
        elif not read.whole:
            self.engine = load_engine(root, read.sources, package)  # its failure: not_loaded
        else:
            try:
                self.engine = load_engine(root, read.sources, package)
            except Exception as e:  # its own step, the default, says why it cannot run
                self.alone = describe(e, None, root)
                self.alone = config_stood_in(self.alone) or self.alone

    def install(self) -> None:
        """Its modules the ones `sys.modules` names (another checkout may be loaded since)."""
        if self.package is not None:
            self.package.install()
        elif self.engine is not None:
            self.engine.install()

    def run(
        self, workload: EngineWorkload, setup: EngineSetup, beat: Callable[[int, str], None] | None
    ) -> EngineTrace:
        if (workload.config.mode or setup.modes[0]) != "own":
            if self.engine is None:
                failure = EngineFailure(
                    UNDRIVABLE,
                    0,
                    "import",
                    "neither its whole engine nor its scheduling code alone could be loaded "
                    f"here: {self.unloaded}; alone: {self.alone}",
                )
                return EngineTrace(workload, traits_of(setup), failure=failure)
            return run_engine(self.engine, workload, setup, beat)
        if self.package is None:
            failure = EngineFailure(
                UNDRIVABLE,
                0,
                "import",
                "its engine could not be imported whole on a CPU, which its own step needs "
                f"(--loop scheduler drives its Scheduler alone): {self.unloaded}",
            )
            return EngineTrace(workload, OWN_TRAITS, failure=failure)
        return run_own_step(self.package, workload, given_config(setup), beat)


class _Here(_InWorker):
    """The engine loaded in this process, beside others loaded since."""

    def run(
        self, workload: EngineWorkload, setup: EngineSetup, beat: Callable[[int, str], None] | None
    ) -> EngineTrace:
        self.install()
        return super().run(workload, setup, beat)


def config_stood_in(message: str) -> str | None:
    """Where the scheduling code, loaded alone, imports a name of its config.py besides
    Config: schedcheck's loop replaced that file (by a Config of its fields alone), so the
    failure is that loop's, not the engine's."""
    found = re.search(r"cannot import name '(\w+)' from '[\w.]+\.config'", message)
    if found is None:
        return None
    return (
        f"its scheduling code imports {found.group(1)} from its config.py, which schedcheck's "
        "loop replaces by a Config of the file's fields alone"
    )


class NanoVllm:
    name = "nanovllm"
    title = "nano-vllm"
    features = Features()
    policies_on: frozenset[str] = frozenset()
    options = frozenset({"package", "config", "runner", "prefill", "loop", "modes"})
    memory_mb = 4096  # torch maps gigabytes of address space before a step is run
    start_timeout = 60.0  # importing torch, and the fork's whole engine
    worker = "schedcheck.engine.nanovllm.worker"
    preload: tuple[str, ...] = PRELOAD

    def setup(self, path: str | None, args: argparse.Namespace) -> EngineSetup:
        return read_setup(
            path,
            args.package,
            args.config,
            args.runner,
            getattr(args, "loop", None),
            getattr(args, "modes", None),
        )

    def traits(self, setup: EngineSetup) -> Traits:
        return OWN_TRAITS if setup.modes[0] == "own" else traits_of(setup)

    def shown(self, setup: EngineSetup) -> str:
        return f"{setup.root}/{setup.package}"

    def header(self, setup: EngineSetup) -> list[str]:
        runner = RUNNERS[setup.runner]
        unset = f"; no value: {', '.join(setup.unset)}" if setup.unset else ""
        lines = [f"config: {setup.config_from}{unset}", loops_line(setup)]
        if "ignore_eos" in setup.lacks:
            lines.append(
                f"sampling params: {setup.package}/sampling_params.py's SamplingParams takes no "
                "ignore_eos: no request ignores eos"
            )
        if "own" in setup.modes:
            lines.append(
                f"own step: {WORLD} tensor-parallel ranks played in this process (unless "
                "--config tensor_parallel_size says otherwise); not run: the model's forward, "
                "its sampler, and the ModelRunner's GPU set-up "
                f"({', '.join(not_run(Path(setup.root), setup.package)) or 'none'})"
            )
        if "scheduler" in setup.modes:
            lines.append(
                f"runner: {runner.name}, the model runner of {runner.source} "
                f"({setup.runner_from}): {runner.describe()}"
            )
        return lines

    def box(self, setup: EngineSetup, scratch: Path) -> Path:
        return setup.folder  # its package's sources: the box holds a copy of them

    def calls(self, workload: EngineWorkload) -> int:
        """Scheduler(); SamplingParams(), Sequence() and add() per request; is_finished(),
        schedule(), postprocess() and a pickle per scheduled sequence per step, up to the
        bound and one more."""
        per_step = 3 + workload.config.max_num_seqs
        return 1 + 3 * len(workload.requests) + (bound(workload) + 2) * per_step

    def before_box(self, path: str) -> Read:
        """The sources (none of its code runs before the box); where its own step can be
        driven, torch and the packages its modules import, which the box cannot reach."""
        sources = read_sources(path)
        root, package = os.path.dirname(path), os.path.basename(path)
        whole = own_step(Path(root), package) is None
        if whole:
            preload_imports(sources, package)
        return Read(sources, whole)

    def in_box(self, path: str, read: Read) -> _InWorker:
        return _InWorker(os.path.dirname(path), read, os.path.basename(path))

    def load(self, setup: EngineSetup) -> _Here:
        sources = read_sources(setup.folder)
        whole = "own" in setup.modes and own_step(Path(setup.root), setup.package) is None
        return _Here(setup.root, Read(sources, whole), setup.package)

    def prefill(self, probe: Callable[[], bool], asked: str | None) -> tuple[bool, str | None]:
        chunked = {"chunked": True, "whole": False}.get(asked or "")
        how = "set with --prefill"
        if chunked is None:
            chunked, how = probe(), "probed: a 6-token prompt, a 4-token budget"
        kind = "chunked" if chunked else "whole (each workload's budget holds its longest sequence)"
        return chunked, f"prefill: {kind} ({how})"

    def not_loaded(self, shown: str, message: str) -> int:
        """A package it imports that is not installed is the user's setup (exit 2), anything
        else the engine's own failure (E6, exit 1)."""
        missing = re.search(r"No module named '([\w.]+)'", message)
        if missing and not missing.group(1).startswith("nanovllm"):
            print(
                f"schedcheck engine: {shown} imports {missing.group(1)}, which is not installed "
                "here; install it (nano-vllm's xxhash and numpy come with schedcheck's extra: "
                "python -m pip install '/path/to/schedcheck[nanovllm]')",
                file=sys.stderr,
            )
            return faults.USAGE
        ours = config_stood_in(message)
        if ours:
            print(
                f"schedcheck engine: {shown} cannot be driven by schedcheck's loop: {ours} "
                "(its own step, --loop own, imports the whole engine instead)",
                file=sys.stderr,
            )
            return faults.USAGE
        print(f"FAIL {shown}: E6: the engine raised while it was loaded: {message}")
        return faults.FAIL

    def undrivable(self, setup: EngineSetup, why: str) -> str:
        said = f"{self.shown(setup)} cannot be driven as nano-vllm's {why}"
        lacking = [m for m in OWN_STEP if not (setup.folder / m).is_file()]
        if "own" not in setup.modes and not lacking and own_step_needs_torch():
            said += (
                "; its own step (--loop own), which drives forks of other shapes through "
                f"their own engine, needs torch: {TORCH}"
            )
        return said

    def render(self, setup: EngineSetup, trace: EngineTrace) -> Rendered | str:
        return render(setup, trace)

    def settle(
        self, setup: EngineSetup, run: Callable[[EngineWorkload], EngineTrace]
    ) -> EngineSetup:
        options = setup.options
        asked = next((options[i + 1] for i, o in enumerate(options[:-1]) if o == "--loop"), None)
        # schedcheck's loop refuses a runner that changes the sequences it runs (read_setup)
        written = runner_writes(Path(setup.root), setup.package)
        fallback: bool | str = asked != "own"
        if fallback and written:
            fallback = (
                f"its model runner changes the sequences it runs ({', '.join(written)}), "
                "which schedcheck's simulated runner does not know to do"
            )
        return settle(setup, run, self.features.block_sizes, fallback)


ADAPTER = NanoVllm()
