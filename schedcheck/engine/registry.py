"""The engines `schedcheck engine --engine NAME` knows, by name, as Hypothesis knows its
providers: each name maps to where its adapter lives (`module:ATTRIBUTE`, imported only
when asked for), or to an adapter object registered at run time. Adding an engine is a
folder holding its adapter (engine/adapter.py's protocol) and a line here, or a call of
register(); `--engine module:ATTRIBUTE` names an adapter that is registered nowhere."""

from __future__ import annotations

import importlib

from schedcheck.engine.adapter import Adapter

__all__ = ["DEFAULT", "UnknownEngine", "adapter", "names", "register", "unregister"]

DEFAULT = "nanovllm"
_ADAPTERS: dict[str, str | Adapter] = {
    "nanovllm": "schedcheck.engine.nanovllm.adapter:ADAPTER",
    "vllm": "schedcheck.engine.vllm.adapter:ADAPTER",
    "sglang": "schedcheck.engine.sglang.adapter:ADAPTER",
}


class UnknownEngine(ValueError):
    """No adapter by that name (a usage error, exit 2)."""


def register(name: str, where: str | Adapter) -> None:
    """Make `--engine name` drive `where`: an adapter, or `module:ATTRIBUTE` naming one."""
    _ADAPTERS[name] = where


def unregister(name: str) -> None:
    _ADAPTERS.pop(name, None)


def names() -> list[str]:
    return list(_ADAPTERS)


def adapter(name: str) -> Adapter:
    """The adapter registered as `name`, or named by `name` as `module:ATTRIBUTE`."""
    where = _ADAPTERS.get(name, name if ":" in name else None)
    if where is None:
        raise UnknownEngine(f"--engine {name}: no such engine (the engines: {', '.join(names())})")
    if not isinstance(where, str):
        return where
    module, _, attribute = where.partition(":")
    try:
        found: Adapter = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as e:
        raise UnknownEngine(f"--engine {name}: its adapter {where} cannot be loaded ({e})") from e
    return found
