"""The rooms of the package in layers, data flowing one way (Workload -> run -> Trace ->
checks -> report): each room imports only itself and the rooms below it, read from every
module's import statements (issue 25). The order is the package docstring's."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from tests.helpers import ROOT

PACKAGE = ROOT / "schedcheck"
# Bottom up; a room may import the rooms of its own line and of the lines before it.
LAYERS = (
    ("faults", "layout", "scheduler"),  # nothing of ours
    ("sandbox",),  # a worker in a box: not the scheduler's data model
    ("model",),
    ("invariants",),
    ("strategies",),
    ("drive",),
    ("verdict",),
    ("search",),
    ("suite",),
    ("grading",),
    ("engine",),
    ("plugin",),
    ("cli",),
    ("__init__", "__main__"),  # the public API and `python -m schedcheck`
)
LEVEL = {room: level for level, rooms in enumerate(LAYERS) for room in rooms}


def imports(path: Path) -> list[str]:
    """The schedcheck modules `path` imports (`from schedcheck import x` names x)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "schedcheck"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "schedcheck":
                found += [f"schedcheck.{a.name}" for a in node.names]
            elif node.module.startswith("schedcheck."):
                found.append(node.module)
    return found


def modules() -> list[tuple[Path, str]]:
    """Every module of the package, the linked rooms (scheduler/, invariants/,
    strategies/) included."""
    found = []
    for folder, dirs, files in os.walk(PACKAGE, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            relative = (Path(folder) / name).relative_to(PACKAGE).with_suffix("")
            found.append((Path(folder) / name, ".".join(("schedcheck", *relative.parts))))
    return found


def room(module: str) -> str:
    """The room of a module: its first part below the package (a module at the package's
    root, like faults or plugin, is a room of its own): schedcheck.drive.impl -> drive."""
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def test_every_room_is_in_a_layer() -> None:
    rooms = {room(module) for _, module in modules()}
    assert rooms <= set(LEVEL), rooms - set(LEVEL)
    assert {"scheduler", "invariants", "strategies", "sandbox", "drive", "model"} <= rooms


@pytest.mark.parametrize(("path", "module"), modules(), ids=lambda v: str(v))
def test_a_module_imports_only_its_room_and_those_below(path: Path, module: str) -> None:
    here = room(module)
    above = [name for name in imports(path) if LEVEL.get(room(name), len(LAYERS)) > LEVEL[here]]
    assert not above, f"{module} ({here}) imports from rooms above it: {above}"


def test_the_check_fires_on_an_import_upward(tmp_path: Path) -> None:
    """The rule itself: a sandbox module importing the data model is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("from schedcheck.model.trace import Trace\nfrom schedcheck import faults\n")
    found = imports(bad)
    assert found == ["schedcheck.model.trace", "schedcheck.faults"]
    assert LEVEL[room(found[0])] > LEVEL["sandbox"] >= LEVEL[room(found[1])]


def test_the_benchmarks_import_nothing_from_the_tests() -> None:
    """bench/ measures the product: what it needs of the catalogue it reads as files."""
    for path in sorted((ROOT / "bench").glob("*.py")):
        tree = ast.parse(path.read_text())
        named = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        named += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [m for m in named if m.split(".")[0] == "tests"], path
