"""Load a nano-vllm checkout's scheduling code by path: no torch, no transformers, no GPU.

Only four files are executed: `nanovllm/sampling_params.py` and `nanovllm/engine/`'s
`sequence.py`, `block_manager.py` and `scheduler.py`. The packages `nanovllm` and
`nanovllm.engine` are made here (their `__init__.py` would import the whole engine), and
`nanovllm.config` is a stub holding the fields the scheduler reads.
"""

from __future__ import annotations

import importlib
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FILES = ("nanovllm/sampling_params.py", "nanovllm/engine/sequence.py",
         "nanovllm/engine/block_manager.py", "nanovllm/engine/scheduler.py")  # fmt: skip


class Config:
    """The stub of nanovllm.config.Config: only what the scheduler reads."""

    def __init__(self, **fields: Any) -> None:
        self.max_num_seqs = fields.get("max_num_seqs", 512)
        self.max_num_batched_tokens = fields.get("max_num_batched_tokens", 16384)
        self.eos = fields.get("eos", -1)
        self.kvcache_block_size = fields.get("kvcache_block_size", 256)
        self.num_kvcache_blocks = fields.get("num_kvcache_blocks", -1)
        self.hf_config = None


@dataclass(frozen=True)
class Engine:
    """A loaded engine: the classes the driver needs, and where they came from."""

    root: Path
    Scheduler: Any
    Sequence: Any
    SamplingParams: Any
    modules: dict[str, types.ModuleType]  # its nanovllm.* modules, by name

    def install(self) -> None:
        """Make its modules the ones `sys.modules` names: pickle finds a class by its
        module's name, and another checkout may have been loaded in this process since."""
        sys.modules.update(self.modules)


class NotAnEngine(ValueError):
    """The folder is not a nano-vllm checkout (a usage error, not a verdict)."""


def missing_files(root: Path) -> list[str]:
    return [name for name in FILES if not (root / name).is_file()]


def load_engine(root: str | Path) -> Engine:
    """Import the checkout at `root` fresh (any earlier `nanovllm` modules are set aside, so
    two checkouts can be loaded one after another in one process)."""
    root = Path(root).resolve()
    missing = missing_files(root)
    if missing:
        raise NotAnEngine(f"{root} is not a nano-vllm checkout: no {', '.join(missing)}")
    for name in [n for n in sys.modules if n == "nanovllm" or n.startswith("nanovllm.")]:
        del sys.modules[name]
    for name, folder in (("nanovllm", root / "nanovllm"),
                         ("nanovllm.engine", root / "nanovllm" / "engine")):  # fmt: skip
        package = types.ModuleType(name)
        package.__path__ = [str(folder)]
        sys.modules[name] = package
    config = types.ModuleType("nanovllm.config")
    config.Config = Config  # type: ignore[attr-defined]
    sys.modules["nanovllm.config"] = config
    importlib.invalidate_caches()
    scheduler = importlib.import_module("nanovllm.engine.scheduler")
    sequence = importlib.import_module("nanovllm.engine.sequence")
    params = importlib.import_module("nanovllm.sampling_params")
    modules = {n: m for n, m in sys.modules.items() if n == "nanovllm" or n.startswith("nanovllm.")}
    return Engine(root, scheduler.Scheduler, sequence.Sequence, params.SamplingParams, modules)
