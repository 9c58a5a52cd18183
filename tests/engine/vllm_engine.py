"""The installed vLLM, loaded in this process for a test module (its tests skip where it is
not installed, and fail where SCHEDCHECK_REQUIRE_VLLM says it must be)."""

from __future__ import annotations

import argparse
import importlib.util
import os
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from schedcheck.engine.adapter import EngineSetup, Features
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.engine.vllm.config import vllm_setup

REQUIRE = "SCHEDCHECK_REQUIRE_VLLM"


def unkeyed(features: Features) -> Features:
    """The features of a search aimed at one mutant's code path, without cache salts and
    LoRA adapters (drawn for vLLM since issue 52, with mutants of their own:
    test_vllm_adapters.py): its draws, and so what it finds, as they were."""
    return replace(features, namespaces=False, adapters=False)


def local_vllm(
    args: argparse.Namespace, has: Callable[[EngineSetup], bool], lacks: str
) -> Iterator[LocalEngine]:
    """vLLM set up by `args`, loaded; skipped with `lacks` where its setup fails `has`."""
    if importlib.util.find_spec("vllm") is None:
        if os.environ.get(REQUIRE):
            pytest.fail(f"vLLM is not installed; {REQUIRE} is set, so these tests must run")
        pytest.skip("vLLM is not installed (.ci/run installs it: .ci/vllm-requirements.txt)")
    setup = vllm_setup(None, args)
    if not has(setup):
        pytest.skip(lacks)
    engine = LocalEngine(VLLM, setup)
    yield engine
    engine.stop()
