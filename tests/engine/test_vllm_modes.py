"""Which modes `schedcheck engine --engine vllm` checks: the release's defaults read off its
files (engine/vllm/modes.py), and the options over them (engine/vllm/config.py). On trees
written here, shaped as vLLM's releases are: no vLLM needed."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from schedcheck.engine.adapter import SetupError
from schedcheck.engine.strategies import EARLY, IN_FLIGHT_ABORT, IN_FLIGHT_PREEMPTION, SKIPPED
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.engine.vllm.config import vllm_setup
from schedcheck.engine.vllm.modes import Mode, release


def tree(root: Path, *, overlaps: bool, by_default: bool, v2: bool, v2_default: bool) -> Path:
    """A vLLM checkout's files that modes.py reads, as a release of those facts has them."""
    sched = root / "vllm" / "v1" / "core" / "sched"
    sched.mkdir(parents=True)
    (sched / "scheduler.py").write_text(
        "class Scheduler:\n" + ("    use_v2_model_runner = False\n" if v2 else "    pass\n")
    )
    if overlaps:
        (sched / "async_scheduler.py").write_text("class AsyncScheduler: pass\n")
    config = root / "vllm" / "config"
    config.mkdir(parents=True)
    default = "bool | None = None" if by_default else "bool = False"
    (config / "scheduler.py").write_text(
        f"class SchedulerConfig:\n    async_scheduling: {default}\n"
    )
    body = "_get_v2_model_runner_unsupported_features" if v2_default else "_ARCHITECTURES"
    (config / "vllm.py").write_text(f"def use_v2_model_runner(self):\n    return {body}\n")
    return root


def options(**given: str | None) -> argparse.Namespace:
    return argparse.Namespace(
        async_scheduling=given.get("scheduling"),
        runner=given.get("runner"),
        modes=given.get("modes"),
    )


def test_a_release_of_today_runs_async_with_the_v2_protocol_by_default(tmp_path: Path) -> None:
    has = release(tree(tmp_path, overlaps=True, by_default=True, v2=True, v2_default=True))
    assert [m.name for m in has.modes()] == ["async-v2", "async-v1", "sync-v1", "sync-v2"]
    setup = vllm_setup(str(tmp_path), options())
    assert setup.modes == ("async-v2",) and setup.options == ()
    assert setup.reaches == (SKIPPED, IN_FLIGHT_PREEMPTION, IN_FLIGHT_ABORT)
    assert VLLM.header(setup)[:2] == ["async: on (release default)", "runner: v2 (release default)"]


def test_a_core_that_looks_at_the_device_reaches_its_early_batches(tmp_path: Path) -> None:
    """0.11 to 0.2x update a batch the device finished first at once: the workloads' early
    steps decide something there, and `reached:` counts them; not where the core holds."""
    tree(tmp_path, overlaps=True, by_default=True, v2=True, v2_default=True)
    core = tmp_path / "vllm" / "v1" / "engine" / "core.py"
    core.parent.mkdir(parents=True, exist_ok=True)
    core.write_text(
        "class EngineCore:\n    def step_with_batch_queue(self):\n"
        "        if not self.batch_queue[-1][0].done():\n            pass\n"
    )
    setup = vllm_setup(str(tmp_path), options())
    assert setup.reaches == (SKIPPED, IN_FLIGHT_PREEMPTION, IN_FLIGHT_ABORT, EARLY)
    assert vllm_setup(str(tmp_path), options(scheduling="off")).reaches == (SKIPPED,)


def test_a_release_that_names_its_v2_architectures_runs_llama_on_v1(tmp_path: Path) -> None:
    """0.2x run the v2 runner by default for the architectures they name only (0.22.1:
    Qwen3): the harness's llama is on v1 there."""
    tree(tmp_path, overlaps=True, by_default=True, v2=True, v2_default=True)
    config = tmp_path / "vllm" / "config" / "vllm.py"
    base = config.read_text()
    listed = 'DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES = frozenset({{"{}"}})\n'
    config.write_text(base + listed.format("Qwen3ForCausalLM"))
    assert release(tmp_path).protocol_by_default == "v1"
    config.write_text(base + listed.format("LlamaForCausalLM"))
    assert release(tmp_path).protocol_by_default == "v2"


def test_a_default_of_none_given_as_a_field_is_read_too(tmp_path: Path) -> None:
    """0.14.0 writes it `async_scheduling: bool = Field(default=None)`."""
    tree(tmp_path, overlaps=True, by_default=False, v2=False, v2_default=False)
    config = tmp_path / "vllm" / "config" / "scheduler.py"
    config.write_text("class SchedulerConfig:\n    async_scheduling: bool = Field(default=None)\n")
    assert release(tmp_path).overlaps_by_default
    config.write_text("class SchedulerConfig:\n    async_scheduling: bool = Field(default=False)\n")
    assert not release(tmp_path).overlaps_by_default


def test_an_older_release_runs_sync_with_the_v1_protocol(tmp_path: Path) -> None:
    """0.11 to 0.13: AsyncScheduler there but off by default, no v2 runner protocol."""
    has = release(tree(tmp_path, overlaps=True, by_default=False, v2=False, v2_default=False))
    assert [m.name for m in has.modes()] == ["sync-v1", "async-v1"]
    setup = vllm_setup(str(tmp_path), options())
    assert setup.modes == ("sync-v1",) and setup.reaches == (SKIPPED,)
    assert VLLM.header(setup)[:2] == [
        "async: off (release default)",
        "runner: v1 (release default)",
    ]
    with pytest.raises(SetupError, match=r"--runner v2: .* protocol v1 only"):
        vllm_setup(str(tmp_path), options(runner="v2"))


def test_the_options_choose_over_the_defaults_and_are_kept_for_the_re_run(tmp_path: Path) -> None:
    tree(tmp_path, overlaps=True, by_default=True, v2=True, v2_default=True)
    off = vllm_setup(str(tmp_path), options(scheduling="off", runner="v1"))
    assert off.modes == ("sync-v1",) and off.options == ("--async", "off", "--runner", "v1")
    assert VLLM.header(off)[:2] == ["async: off (chosen)", "runner: v1 (chosen)"]
    every = vllm_setup(str(tmp_path), options(modes="all"))
    assert every.modes == ("async-v2", "async-v1", "sync-v1", "sync-v2")
    assert "modes: async-v2, async-v1, sync-v1, sync-v2 (drawn per workload)" in VLLM.header(every)
    synced = vllm_setup(str(tmp_path), options(scheduling="off", modes="all"))
    assert synced.modes == ("sync-v2", "sync-v1")  # every mode of the scheduling asked for


def test_a_release_without_async_scheduling_refuses_it(tmp_path: Path) -> None:
    tree(tmp_path, overlaps=False, by_default=False, v2=False, v2_default=False)
    with pytest.raises(SetupError, match="--async on: this vLLM release has no async scheduling"):
        vllm_setup(str(tmp_path), options(scheduling="on"))


def test_what_the_engine_core_does_is_read_off_it(
    tmp_path: Path,
) -> None:
    """Whether it asks the device (0.11 to 0.2x: `... and not batch_queue[-1][0].done()`;
    0.33 never asks), and whether it takes aborts eagerly (`_process_aborts_queue`)."""
    tree(tmp_path, overlaps=True, by_default=True, v2=False, v2_default=False)
    core = tmp_path / "vllm" / "v1" / "engine"
    core.mkdir(parents=True)
    (core / "core.py").write_text(
        "class EngineCore:\n    def step_with_batch_queue(self):\n"
        "        if executed and not batch_queue[-1][0].done():\n            return\n"
        "    def after(self):\n        future.done()\n"
    )
    setup = vllm_setup(str(tmp_path), options())
    assert release(tmp_path).looks_at_device and setup.config["looks_at_device"]
    assert "updated at once (drawn)" in VLLM.header(setup)[2]
    (core / "core.py").write_text(
        "class EngineCore:\n    def step_with_batch_queue(self):\n"
        "        self._process_aborts_queue()\n"
        "    def after(self):\n        future.done()\n"
    )
    assert not release(tmp_path).looks_at_device and release(tmp_path).eager_aborts


def test_a_mode_name_parses_back_and_a_wrong_one_is_refused() -> None:
    for name in ("async-v1", "async-v2", "sync-v1", "sync-v2"):
        assert Mode.parse(name).name == name
    with pytest.raises(ValueError, match="'async-v3' is no vLLM mode"):
        Mode.parse("async-v3")


def test_a_release_without_the_v1_runner_speaks_v2_alone(tmp_path: Path) -> None:
    """0.34 removed the v1 model runner (and its scheduler's switch): v2 is its only
    protocol, and its default, though its scheduler names no `use_v2_model_runner`."""
    tree(tmp_path, overlaps=True, by_default=True, v2=False, v2_default=False)
    worker = tmp_path / "vllm" / "v1" / "worker"
    (worker / "gpu").mkdir(parents=True)
    (worker / "gpu" / "model_runner.py").write_text("class GPUModelRunner: ...\n")
    has = release(tmp_path)
    assert has.protocols == ("v2",) and has.protocol_by_default == "v2"
    assert [m.name for m in has.modes()] == ["async-v2", "sync-v2"]
    (worker / "gpu_model_runner.py").write_text("class GPUModelRunner: ...\n")
    assert release(tmp_path).protocols == ("v1",)


def test_a_release_that_asserts_a_block_of_budget_for_mamba_says_so(tmp_path: Path) -> None:
    """0.22 to 0.26's VllmConfig asserts, in Mamba's align mode, a block of at most
    max_num_batched_tokens (#34445); 0.27 on splits a wider block instead. The setup
    carries it to the features (Features.state_budget), which keep a Mamba workload's
    budget at a block at least."""
    tree(tmp_path, overlaps=True, by_default=True, v2=True, v2_default=True)
    config = tmp_path / "vllm" / "config" / "vllm.py"
    base = config.read_text()
    assert not release(tmp_path).state_budget
    config.write_text(base + '\n"In Mamba cache align mode, block_size "\n')
    assert release(tmp_path).state_budget
    assert vllm_setup(str(tmp_path), options()).features(VLLM.features).state_budget
