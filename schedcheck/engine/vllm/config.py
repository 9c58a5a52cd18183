"""Which vLLM to check, decided before anything of it runs: the installed release, or a
checkout (a folder holding `vllm/`, built or installed in editable mode), found without
importing it, as plain data for its worker."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from schedcheck.engine.adapter import EngineSetup, SetupError
from schedcheck.engine.vllm.drive import RUNNER

EXTRA = "python -m pip install 'schedcheck[vllm]' (docs/engines.md, \"vLLM\")"


def vllm_setup(path: str | None) -> EngineSetup:
    """The setup for `schedcheck engine --engine vllm [PATH]`; SetupError (exit 2) when there is no
    vLLM there."""
    if path is None:
        spec = importlib.util.find_spec("vllm")
        if spec is None or not spec.submodule_search_locations:
            raise SetupError(f"vLLM is not installed here: {EXTRA}")
        root = Path(next(iter(spec.submodule_search_locations))).parent
        try:
            version = importlib.metadata.version("vllm")
        except importlib.metadata.PackageNotFoundError:
            version = "of unknown version"
        where = f"vLLM {version}, installed"
    else:
        root = Path(path).resolve()
        if not (root / "vllm" / "v1" / "core" / "sched" / "scheduler.py").is_file():
            raise SetupError(
                f"{path} holds no vLLM checkout (no vllm/v1/core/sched/scheduler.py): give "
                "the folder holding vllm/, or no PATH for the installed vLLM"
            )
        where = f"the vLLM checkout at {root}"
    return EngineSetup(
        root=str(root),
        package="vllm",
        runner=RUNNER.name,
        runner_from="vLLM's own",
        config_from=f"{where}; SchedulerConfig and CacheConfig from each workload (chunked "
        "prefill and prefix caching on, async scheduling off, the v1 model runner)",
    )
