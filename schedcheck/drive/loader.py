"""Load an implementation: the reference, or any submission file by path."""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType

REFERENCE = "reference"
_counter = itertools.count()


def reference_source() -> str:
    """The reference as one submission file: scheduler/sequence.py and scheduler/scheduler.py
    as one module importing nothing of schedcheck (a box cannot import the reference: a
    submission must not see the course's solution)."""
    folder = Path(importlib.import_module("schedcheck.scheduler").__file__ or "").parent
    ours = ("from __future__", "from schedcheck.scheduler")
    body = "\n".join(
        line
        for name in ("sequence.py", "scheduler.py")
        for line in (folder / name).read_text().splitlines()
        if not line.startswith(ours)
    )
    return f"from __future__ import annotations\n{body}\n"


def load_impl(where: str | Path = REFERENCE) -> ModuleType:
    """The module at `where` (a .py file), or the reference package for "reference".

    Every load is a fresh module under a name of its own, so two submissions (or the same
    one loaded twice) never share state, and nothing named like the checker is replaced.
    """
    if str(where) == REFERENCE:
        return importlib.import_module("schedcheck.scheduler")
    path = Path(where).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no submission file at {path}")
    name = f"schedcheck_submission_{next(_counter)}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up here
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
