"""Load a nano-vllm checkout's scheduling code: no torch, no transformers, no GPU.

The checkout's `nanovllm/**/*.py` sources are read into memory first (an isolated worker
reads them before it enters its box, where the files are out of view) and imported from
there by a finder of our own: the packages' `__init__.py` are not run (they would import
the whole engine), and `nanovllm.config` is a stub holding the fields the scheduler reads.
Only what `nanovllm/engine/scheduler.py` and `nanovllm/sampling_params.py` import runs.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import linecache
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


class NotAnEngine(ValueError):
    """The folder is not a nano-vllm checkout (a usage error, not a verdict)."""


def missing_files(root: Path) -> list[str]:
    return [name for name in FILES if not (root / name).is_file()]


def read_sources(root: str | Path) -> dict[str, str]:
    """Every `nanovllm/**/*.py` of the checkout, by path relative to `root`."""
    root = Path(root)
    missing = missing_files(root)
    if missing:
        raise NotAnEngine(f"{root} is not a nano-vllm checkout: no {', '.join(missing)}")
    return {
        str(p.relative_to(root)): p.read_text(errors="replace")
        for p in sorted((root / "nanovllm").rglob("*.py"))
    }


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`nanovllm.*` from the sources: packages empty, modules compiled from their text."""

    def __init__(self, root: Path, sources: dict[str, str]) -> None:
        self.root, self.sources = root, sources

    def find_spec(
        self, name: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != "nanovllm" and not name.startswith("nanovllm."):
            return None
        rel = name.replace(".", "/")
        if any(key.startswith(rel + "/") for key in self.sources):
            spec = importlib.machinery.ModuleSpec(name, self, is_package=True)
            spec.submodule_search_locations = []
            return spec
        if rel + ".py" in self.sources:
            spec = importlib.machinery.ModuleSpec(name, self, origin=str(self.root / f"{rel}.py"))
            spec.has_location = True
            return spec
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__spec__ is None or module.__spec__.origin is None:
            return  # a package: its __init__.py is not run
        filename = module.__spec__.origin
        source = self.sources[str(Path(filename).relative_to(self.root))]
        module.__file__ = filename
        # Tracebacks quote the engine's lines from here, even where its files are not visible.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), module.__dict__)


@dataclass(frozen=True)
class Engine:
    """A loaded engine: the classes the driver needs, and where they came from."""

    root: Path
    Scheduler: Any
    Sequence: Any
    SamplingParams: Any
    modules: dict[str, types.ModuleType]  # its nanovllm.* modules, by name
    finder: _Finder

    def install(self) -> None:
        """Make its modules the ones `sys.modules` names, its finder the first asked: pickle
        finds a class by its module's name, and another checkout may have been loaded in
        this process since."""
        sys.modules.update(self.modules)
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        sys.meta_path.insert(0, self.finder)


def load_engine(root: str | Path, sources: dict[str, str] | None = None) -> Engine:
    """Import the checkout at `root` (from `sources` when given, as read before), fresh:
    any earlier `nanovllm` modules are set aside, so checkouts load one after another."""
    root = Path(root).resolve()
    sources = read_sources(root) if sources is None else sources
    for name in [n for n in sys.modules if n == "nanovllm" or n.startswith("nanovllm.")]:
        del sys.modules[name]
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Finder)]
    finder = _Finder(root, sources)
    sys.meta_path.insert(0, finder)
    config = types.ModuleType("nanovllm.config")
    config.Config = Config  # type: ignore[attr-defined]
    sys.modules["nanovllm.config"] = config
    scheduler = importlib.import_module("nanovllm.engine.scheduler")
    sequence = importlib.import_module("nanovllm.engine.sequence")
    params = importlib.import_module("nanovllm.sampling_params")
    modules = {n: m for n, m in sys.modules.items() if n == "nanovllm" or n.startswith("nanovllm.")}
    return Engine(root, scheduler.Scheduler, sequence.Sequence, params.SamplingParams, modules,
                  finder)  # fmt: skip
