"""The modes a vLLM release runs its scheduler in, read off its source without importing it
(docs/engines.md, "vLLM's modes"): how it schedules (async: its engine core overlaps two
steps, AsyncScheduler; sync: one step at a time, Scheduler) and which model runner's
protocol its SchedulerOutput speaks (v1: a resumed request is sent among the cached ones,
with all_token_ids where the runner dropped it; v2: as a new request with its whole token
list). Each fact is read where the release states it, not from its version number:

- async scheduling exists where `vllm/v1/core/sched/async_scheduler.py` does, and is the
  default where `SchedulerConfig.async_scheduling` defaults to None (0.14 on: VllmConfig
  resolves None to on for a generation model on a GPU; before, it defaulted to False);
- the v2 protocol exists where the Scheduler reads `use_v2_model_runner`, and is the
  default for the harness's model (a dense llama) where `VllmConfig.use_v2_model_runner`
  turns it on unless a feature is unsupported (`_get_v2_model_runner_unsupported_features`)
  and, where the release names the architectures it runs by default
  (`DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`, 0.2x), names llama's; and it is the only one
  where the release has removed the v1 runner (0.34: no `v1/worker/gpu_model_runner.py`);
- its engine core looks at the device where `EngineCore.step_with_batch_queue` asks
  whether the oldest batch is `done()`: then a batch the device finished before the core
  looked is updated at once (which the workloads draw: EngineWorkload.early).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ARCHITECTURE", "Mode", "Release", "release", "v2_only"]

ARCHITECTURE = "LlamaForCausalLM"  # the model the harness configures (build.py's MODEL)


@dataclass(frozen=True)
class Mode:
    """One way to run the scheduler: its scheduling and its runner's protocol."""

    overlapped: bool  # async scheduling: the engine core schedules step N+1 before N's update
    protocol: str  # "v1" or "v2"

    @property
    def name(self) -> str:
        return f"{'async' if self.overlapped else 'sync'}-{self.protocol}"

    @classmethod
    def parse(cls, name: str) -> Mode:
        """ValueError for a name that is no mode."""
        scheduling, _, protocol = name.partition("-")
        if scheduling not in ("async", "sync") or protocol not in ("v1", "v2"):
            raise ValueError(f"{name!r} is no vLLM mode (async-v1, async-v2, sync-v1 or sync-v2)")
        return cls(scheduling == "async", protocol)


@dataclass(frozen=True)
class Release:
    """What a release has, and what it runs by default."""

    overlaps: bool  # it has async scheduling
    overlaps_by_default: bool
    protocols: tuple[str, ...]  # "v1", and "v2" where its scheduler speaks it
    protocol_by_default: str
    # its engine core, with a batch queue of two, updates a batch at once where it finds it
    # already done (`not batch_queue[-1][0].done()`, 0.11 to 0.2x); later ones hold it
    # while there is more to schedule, however fast the device was
    looks_at_device: bool = False
    # its engine core takes an abort that lands during a step just before the step's
    # update (`aborts_queue`, `_process_aborts_queue`), as well as between steps
    eager_aborts: bool = False
    # with speculative decoding, its v2 runner's DraftTokensHandler keeps the draft width of
    # every request it holds drafts for (`_draft_tokens_by_req`, 0.34), which a sync engine
    # core hands the scheduler after each step; before, only the last batch's
    every_draft: bool = False
    # a KV connector registered by module path (KVTransferConfig.kv_connector_module_path),
    # and the policy for a failed load (kv_load_failure_policy: recompute or fail)
    connectors: bool = False
    load_failure_policy: bool = False
    # streaming-input sessions: a Request may be resumable (0.15 on)
    sessions: bool = False
    # its own OffloadingConnector speaks the job protocol: TransferJobs in the metadata, the
    # worker's completions in OffloadingWorkerMetadata (0.2x on), its CPU tier's manager
    # running without a GPU
    offloading: bool = False
    # a hybrid model's layers laid out into KV cache groups by its planner's
    # get_kv_cache_configs(vllm_config, specs per worker, memory per worker) (0.22 on;
    # 0.34 moves it to kv_cache_planning.py): hybrid.py
    hybrid: bool = False
    # its config asserts, in Mamba's align mode, a block of at most max_num_batched_tokens
    # (`VllmConfig.__post_init__`, #34445: 0.22 to 0.26; 0.27 on splits a wider block)
    state_budget: bool = False

    def modes(self) -> list[Mode]:
        """Every mode it has, its default first."""
        default = Mode(self.overlaps_by_default, self.protocol_by_default)
        every = [
            Mode(overlapped, protocol)
            for overlapped in ((True, False) if self.overlaps else (False,))
            for protocol in self.protocols
        ]
        return [default, *(m for m in every if m != default)]


# `async_scheduling: bool | None = None` (0.33), `async_scheduling: bool = Field(default=None)`
# (0.14): a default of None, which VllmConfig resolves
# 0.2x name the architectures the v2 runner is the default for (0.22.1: Qwen3 only)
_ALLOWLIST = re.compile(r"DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES\s*=\s*frozenset\(\s*\{([^}]*)\}")
_ASYNC_DEFAULT = re.compile(
    r"^\s*async_scheduling:[^=\n]*=\s*(?:Field\(\s*default\s*=\s*)?None\b", re.M
)


def release(root: Path) -> Release:
    """The release whose package is `root`/vllm, read off its files (a file it lacks: the
    feature is not there)."""
    package = root / "vllm"
    overlaps = (package / "v1" / "core" / "sched" / "async_scheduler.py").is_file()
    overlaps_by_default = overlaps and bool(
        _ASYNC_DEFAULT.search(_text(package / "config" / "scheduler.py"))
    )
    v2 = "use_v2_model_runner" in _text(package / "v1" / "core" / "sched" / "scheduler.py")
    config = _text(package / "config" / "vllm.py")
    v2_by_default = v2 and "_get_v2_model_runner_unsupported_features" in config
    listed = _ALLOWLIST.search(config)
    if v2_by_default and listed:  # 0.2x: the architectures it runs by default, named
        v2_by_default = f'"{ARCHITECTURE}"' in listed.group(1)
    core = _text(package / "v1" / "engine" / "core.py")
    transfer = _text(package / "config" / "kv_transfer.py")
    step = core.partition("def step_with_batch_queue")[2].partition("\n    def ")[0]
    protocols = ("v1", "v2") if v2 else ("v1",)
    if v2_only(package):  # 0.34: the v1 runner removed, its scheduler speaking v2 alone
        protocols, v2_by_default = ("v2",), True
    return Release(
        overlaps,
        overlaps_by_default,
        protocols,
        "v2" if v2_by_default else "v1",
        ".done()" in step,
        "_process_aborts_queue" in core,
        "_draft_tokens_by_req"
        in _text(package / "v1" / "worker" / "gpu" / "spec_decode" / "utils.py"),
        "kv_connector_module_path" in transfer,
        "kv_load_failure_policy" in transfer,
        "resumable" in _text(package / "v1" / "request.py"),
        "class OffloadingWorkerMetadata" in _text(package / OFFLOADING / "common.py"),
        (package / "v1" / "core" / "kv_cache_planning.py").is_file()
        or "available_memory: list[int]" in _text(package / "v1" / "core" / "kv_cache_utils.py"),
        "In Mamba cache align mode, block_size" in config,
    )


OFFLOADING = Path("distributed", "kv_transfer", "kv_connector", "v1", "offloading")


def v2_only(package: Path) -> bool:
    """Whether the release has the v2 model runner only (0.34: `v1/worker/gpu_model_runner.py`
    gone, `v1/worker/gpu/model_runner.py` there; its scheduler has no switch, and sends a
    resumed request as new)."""
    worker = package / "v1" / "worker"
    return (worker / "gpu" / "model_runner.py").is_file() and not (
        worker / "gpu_model_runner.py"
    ).is_file()


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""
