"""The engine room's core names no engine (issue 34): its top-level modules
(schedcheck/engine/*.py) import no adapter and compare no engine's or runner's name; each
subfolder is one adapter, which imports no other; every registered adapter has every
member of the protocol. What differs between engines is data an adapter declares."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from schedcheck.engine import registry
from schedcheck.engine.adapter import Adapter
from schedcheck.engine.layers import KINDS
from schedcheck.engine.nanovllm.runners import RUNNERS as NANO_RUNNERS
from schedcheck.engine.runner import Decode, Span
from schedcheck.engine.vllm.drive import RUNNER as VLLM_RUNNER
from tests.helpers import ROOT
from tests.product.test_layers import imports

ROOM = ROOT / "schedcheck" / "engine"
CORE = sorted(ROOM.glob("*.py"))
ADAPTERS = sorted(d for d in ROOM.iterdir() if (d / "__init__.py").is_file())
# Every engine's and runner's name the core could be tempted to branch on; less the words
# that are a runner rule's values too (nano-vllm's runner "mixed" is named after its decode
# rule, which the core does read: Runner.decode == "mixed"), and a hybrid model's layer
# kinds (nano-vllm's runner "window" shares a word with the sliding-window layer: Layer.kind)
RULES = {*typing.get_args(Span), *typing.get_args(Decode), *KINDS}
NAMES = {*registry.names(), *NANO_RUNNERS, VLLM_RUNNER.name, "nano-vllm", "nano_vllm", "vLLM"}
NAMES -= RULES


def compared_names(source: str) -> list[str]:
    """The engine or runner names `source` compares something with (==, !=, in, is)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        for operand in [node.left, *node.comparators]:
            items = (
                operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
            )
            found += [
                item.value
                for item in items
                if isinstance(item, ast.Constant) and item.value in NAMES
            ]
    return found


def test_the_name_finder_fires_on_a_branch_on_a_name() -> None:
    assert compared_names('if trace.runner == "vllm":\n    pass') == ["vllm"]
    assert compared_names('x = name in ("nanovllm", "other")') == ["nanovllm"]
    assert compared_names("x = trace.traits.hashes_name_prefixes == True") == []


def test_the_room_has_a_core_and_adapters() -> None:
    assert {d.name for d in ADAPTERS} == {"nanovllm", "vllm", "sglang"}
    assert {"adapter.py", "registry.py", "run.py", "checks.py", "command.py"} <= {
        p.name for p in CORE
    }


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.name)
def test_a_core_module_imports_no_adapter(path: Path) -> None:
    adapters = tuple(f"schedcheck.engine.{d.name}" for d in ADAPTERS)
    found = [name for name in imports(path) if name.startswith(adapters)]
    assert not found, f"{path.name} imports an adapter: {found}"


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.name)
def test_a_core_module_compares_no_engine_or_runner_name(path: Path) -> None:
    assert compared_names(path.read_text()) == [], path.name


@pytest.mark.parametrize("folder", ADAPTERS, ids=lambda d: d.name)
def test_an_adapter_imports_no_other(folder: Path) -> None:
    others = tuple(f"schedcheck.engine.{d.name}" for d in ADAPTERS if d != folder)
    for path in sorted(folder.glob("*.py")):
        found = [name for name in imports(path) if name.startswith(others)]
        assert not found, f"{folder.name}/{path.name} imports another adapter: {found}"


def members() -> set[str]:
    declared = set(typing.get_type_hints(Adapter))
    methods = {n for n, v in vars(Adapter).items() if callable(v) and not n.startswith("_")}
    return declared | methods


@pytest.mark.parametrize("name", registry.names())
def test_every_registered_adapter_has_the_whole_protocol(name: str) -> None:
    adapter = registry.adapter(name)
    missing = sorted(m for m in members() if not hasattr(adapter, m))
    assert not missing, f"{name} lacks {missing}"
    assert adapter.name == name
    assert members() >= {"setup", "traits", "features", "worker", "memory_mb", "load"}
