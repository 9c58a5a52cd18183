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
from pathlib import Path

from schedcheck import faults
from schedcheck.engine.adapter import EngineSetup, Features
from schedcheck.engine.nanovllm.config import read_setup
from schedcheck.engine.nanovllm.drive import run_engine, traits_of
from schedcheck.engine.nanovllm.loader import Engine, load_engine, read_sources
from schedcheck.engine.nanovllm.runners import RUNNERS
from schedcheck.engine.run import bound
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.traits import Traits
from schedcheck.engine.workload import EngineWorkload
from schedcheck.sandbox.process import DEFAULT_MEMORY_MB

__all__ = ["ADAPTER", "NanoVllm"]

# What nano-vllm's scheduling modules import (xxhash and numpy when the extra is installed)
# and what the driver needs: after the privilege drop nothing new can be imported.
PRELOAD = ("array", "hashlib", "inspect", "pickle", "zlib", "xxhash", "numpy")


class _InWorker:
    """The engine loaded inside its worker's box."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def run(
        self, workload: EngineWorkload, setup: EngineSetup, beat: Callable[[int, str], None] | None
    ) -> EngineTrace:
        return run_engine(self.engine, workload, setup, beat)


class _Here(_InWorker):
    """The engine loaded in this process, beside others loaded since."""

    def run(
        self, workload: EngineWorkload, setup: EngineSetup, beat: Callable[[int, str], None] | None
    ) -> EngineTrace:
        self.engine.install()
        return run_engine(self.engine, workload, setup, beat)


class NanoVllm:
    name = "nanovllm"
    title = "nano-vllm"
    features = Features()
    policies_on: frozenset[str] = frozenset()
    options = frozenset({"package", "config", "runner", "prefill"})
    memory_mb = DEFAULT_MEMORY_MB
    start_timeout = 0.0  # the sandbox's own
    worker = "schedcheck.engine.nanovllm.worker"
    preload: tuple[str, ...] = PRELOAD

    def setup(self, path: str | None, args: argparse.Namespace) -> EngineSetup:
        return read_setup(path, args.package, args.config, args.runner)

    def traits(self, setup: EngineSetup) -> Traits:
        return traits_of(setup)

    def shown(self, setup: EngineSetup) -> str:
        return f"{setup.root}/{setup.package}"

    def header(self, setup: EngineSetup) -> list[str]:
        runner = RUNNERS[setup.runner]
        unset = f"; no value: {', '.join(setup.unset)}" if setup.unset else ""
        return [
            f"config: {setup.config_from}{unset}",
            f"runner: {runner.name}, the model runner of {runner.source} ({setup.runner_from}): "
            f"{runner.describe()}",
        ]

    def box(self, setup: EngineSetup, scratch: Path) -> Path:
        return setup.folder  # its package's sources: the box holds a copy of them

    def calls(self, workload: EngineWorkload) -> int:
        """Scheduler(); SamplingParams(), Sequence() and add() per request; is_finished(),
        schedule(), postprocess() and a pickle per scheduled sequence per step, up to the
        bound and one more."""
        per_step = 3 + workload.config.max_num_seqs
        return 1 + 3 * len(workload.requests) + (bound(workload) + 2) * per_step

    def before_box(self, path: str) -> dict[str, str]:
        return read_sources(path)  # the sources only: none of its code runs before the box

    def in_box(self, path: str, read: dict[str, str]) -> _InWorker:
        return _InWorker(load_engine(os.path.dirname(path), read, os.path.basename(path)))

    def load(self, setup: EngineSetup) -> _Here:
        return _Here(load_engine(setup.root, package=setup.package))

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
        print(f"FAIL {shown}: E6: the engine raised while it was loaded: {message}")
        return faults.FAIL

    def undrivable(self, shown: str, why: str) -> str:
        return f"{shown} cannot be driven as nano-vllm's {why}"


ADAPTER = NanoVllm()
