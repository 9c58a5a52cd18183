"""The repository's own test run: schedcheck's pytest plugin (schedcheck/plugin.py) plus
what only this repository's tests need (the `costly`, `redis`, `nanovllm`, `registry`,
`torch`, `vllm`, `sglang` and `browser` markers).

A checkout is installed before its tests run (`pip install -e .`, the README's first
command): pytest then loads the plugin through its entry point before it reads the command
line, which `--impl /any/absolute/path` needs. Named here too, it is found registered
already (pyproject.toml names the entry point like the module) and not loaded twice.
"""

from __future__ import annotations

import os

import pytest

from schedcheck.drive.loader import REFERENCE

pytest_plugins = ("schedcheck.plugin",)

# The processes this run starts (hundreds: `schedcheck check`, pytest, workers in their
# boxes) may cache their bytecode even where the environment says not to, as container
# images often do: else each recompiles schedcheck and has pytest rewrite Hypothesis's
# modules anew, a second or two apiece. Nothing they compute depends on it.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

MARKERS = (
    "costly: a self-check too slow for every run; `pytest -m costly` runs them all "
    "(.ci/run does), the default run a rotating few",
    "redis: needs redis-server and the [redis] extra (skipped without them, unless "
    "SCHEDCHECK_REQUIRE_REDIS is set)",
    "nanovllm: needs the [nanovllm] extra, xxhash and numpy (skipped without it, unless "
    "SCHEDCHECK_REQUIRE_NANOVLLM is set)",
    "registry: downloads published nano-vllm derivatives from the package registry with pip "
    "(skipped without the registry or the [nanovllm] extra, unless "
    "SCHEDCHECK_REQUIRE_REGISTRY is set)",
    "vllm: needs vLLM installed (.ci/vllm-requirements.txt; skipped without it, unless "
    "SCHEDCHECK_REQUIRE_VLLM is set)",
    "torch: needs torch, a CPU build (a nano-vllm fork's own engine step; skipped without "
    "it, unless SCHEDCHECK_REQUIRE_TORCH is set)",
    "sglang: needs SGLang installed (.ci/install-sglang; skipped without it, unless "
    "SCHEDCHECK_REQUIRE_SGLANG is set)",
    "browser: opens a page in headless Chromium (skipped without /usr/bin/chromium, unless "
    "SCHEDCHECK_REQUIRE_BROWSER is set; .ci/run installs Debian's chromium)",
    "heavy: a self-check of ten seconds or more, started before the others so that no core "
    "idles at the end of `pytest -n auto`",
)


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Costly self-checks run only when asked for (`-m costly`, or any -m expression); the
    heavy ones first (xdist hands tests out in collection order, and work stealing takes
    from the end of a queue: a long test left for last keeps one core busy alone)."""
    if not config.getoption("markexpr"):
        costly = [item for item in items if item.get_closest_marker("costly")]
        if costly:
            config.hook.pytest_deselected(items=costly)
            items[:] = [item for item in items if not item.get_closest_marker("costly")]
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)  # stable


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` in this checkout's own run: a worker more than the cores. Many self-checks
    spend their time waiting on processes of their own (a worker starting in its box, a
    hung call's timeout, a pytest or `schedcheck` subprocess), and a third worker fills
    those waits. A run with `--impl` keeps xdist's own count (there the work is the
    submission's, one worker per core), and so does a run of chosen marks (`-m costly`:
    tests that each start several processes, some of them timed)."""
    if config.getoption("--impl", REFERENCE) != REFERENCE or config.getoption("markexpr"):
        return None  # a submission's run, or a chosen set (-m costly: heavier tests each)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1
