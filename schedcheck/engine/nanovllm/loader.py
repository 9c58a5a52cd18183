"""Load a nano-vllm checkout's scheduling code: no torch, no transformers, no GPU.

The package's `**/*.py` sources (`nanovllm/`, or a fork's own name) are read into memory
first (an isolated worker reads them before it enters its box, where the files are out of
view) and imported from there by a finder of our own: the packages' `__init__.py` are not
run (they would import the whole engine), and `<package>.config` is replaced by a `Config`
holding the fields read off the engine's own config.py (schedcheck/engine/nanovllm/config.py). Only
what `engine/scheduler.py` and `sampling_params.py` import runs.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import linecache
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedcheck.engine.nanovllm.config import missing_modules
from schedcheck.engine.nanovllm.standins import stood_in


class ConfigUnset(AttributeError):
    """The engine read a Config field that has no value: the user's to give (exit 2)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"Config.{name} has no value: schedcheck read no default for it in the engine's "
            f"config.py; give one with --config {name}=VALUE"
        )
        self.field = name


class Config:
    """The engine's Config without its __post_init__ (which loads a model): the fields and
    defaults read off its config.py, the workload's values over them (nanovllm/config.py)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __getattr__(self, name: str) -> Any:  # only called for a field with no value
        if name.startswith("__"):
            raise AttributeError(name)
        raise ConfigUnset(name)


class NotAnEngine(ValueError):
    """The folder is not a nano-vllm checkout (a usage error, not a verdict)."""


def read_sources(folder: str | Path) -> dict[str, str]:
    """Every `*.py` of the package folder, by path relative to its parent."""
    folder = Path(folder)
    missing = missing_modules(folder.parent, folder.name)
    if missing:
        raise NotAnEngine(f"{folder.parent} is not a nano-vllm checkout: no {', '.join(missing)}")
    return {
        str(p.relative_to(folder.parent)): p.read_text(errors="replace")
        for p in sorted(folder.rglob("*.py"))
    }


class SourceFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`<package>.*` from the sources: packages empty, modules compiled from their text."""

    def __init__(
        self, root: Path, package: str, sources: dict[str, str], inits: bool = False
    ) -> None:
        self.root, self.package, self.sources = root, package, sources
        self.inits = inits  # whether a package's __init__.py runs (the whole engine's do)

    def find_spec(
        self, name: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != self.package and not name.startswith(self.package + "."):
            return None
        rel = name.replace(".", "/")
        if any(key.startswith(rel + "/") for key in self.sources):
            init = f"{rel}/__init__.py"
            origin = str(self.root / init) if self.inits and init in self.sources else None
            spec = importlib.machinery.ModuleSpec(name, self, origin=origin, is_package=True)
            spec.submodule_search_locations = []
            spec.has_location = origin is not None
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
    package: str
    Scheduler: Any
    Sequence: Any
    SamplingParams: Any
    modules: dict[str, types.ModuleType]  # its nanovllm.* modules, by name
    finder: SourceFinder

    def install(self) -> None:
        """Make its modules the ones `sys.modules` names, its finder the first asked: pickle
        finds a class by its module's name, and another checkout may have been loaded in
        this process since."""
        sys.modules.update(self.modules)
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        sys.meta_path.insert(0, self.finder)


def load_engine(
    root: str | Path, sources: dict[str, str] | None = None, package: str = "nanovllm"
) -> Engine:
    """Import the package `package` of the checkout at `root` (from `sources` when given, as
    read before), fresh: any earlier modules of that name are set aside, so checkouts load
    one after another."""
    root = Path(root).resolve()
    sources = read_sources(root / package) if sources is None else sources
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, SourceFinder)]
    finder = SourceFinder(root, package, sources)
    sys.meta_path.insert(0, finder)
    config = types.ModuleType(f"{package}.config")
    config.Config = Config  # type: ignore[attr-defined]
    sys.modules[f"{package}.config"] = config
    scheduler = importlib.import_module(f"{package}.engine.scheduler")
    sequence = importlib.import_module(f"{package}.engine.sequence")
    has_params = f"{package}/sampling_params.py" in sources  # nano-vllm-voxcpm has none
    params = importlib.import_module(f"{package}.sampling_params") if has_params else None
    modules = {n: m for n, m in sys.modules.items() if n == package or n.startswith(package + ".")}
    return Engine(
        root,
        package,
        scheduler.Scheduler,
        sequence.Sequence,
        getattr(params, "SamplingParams", None),
        modules,
        finder,
    )


# What a fork's whole engine needs of torch and the standard library beyond what its own
# modules name (torch imports some of its parts lazily, on first use).
OWN_STEP_PRELOAD = (
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.utils._device",
    "torch._dynamo",
    "torch.distributed",
    "torch.multiprocessing",
    "multiprocessing.shared_memory",
    "multiprocessing.synchronize",
    "atexit",
    "dataclasses",
    "itertools",
    "copy",
)


def imported(sources: dict[str, str], package: str) -> list[str]:
    """The modules a package's sources import from outside it (read off their text): a
    module named in `import a.b`, and `a.b` and `a.b.c` for `from a.b import c`."""
    names: list[str] = []
    for text in sources.values():
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.append(node.module)
                names += [f"{node.module}.{alias.name}" for alias in node.names]
    own = (package, *stood_in())
    return sorted({n for n in names if n.split(".")[0] not in own})


def preload_imports(sources: dict[str, str], package: str) -> list[str]:
    """Import, before the box, what the fork's whole engine will import inside it (its code
    does not run: only the installed packages it names); the names that did not import."""
    failed = []
    for name in (*OWN_STEP_PRELOAD, *imported(sources, package)):
        try:
            importlib.import_module(name)
        except Exception:  # a name imported from a module, not a module; or not installed
            if not _attribute(name):
                failed.append(name)
    return failed


def _attribute(name: str) -> bool:
    """`name` read as an attribute of its module (`from pydantic import BaseModel`): read
    now, since a package that imports its attributes lazily (pydantic's `__getattr__`)
    would import the module that defines it inside the box, where it cannot."""
    module, _, attribute = name.rpartition(".")
    if module not in sys.modules:
        return False
    try:
        getattr(sys.modules[module], attribute)
    except Exception:
        return False
    return True
