"""Build vLLM's v1 Scheduler on the CPU, with no model weights, for one engine workload.

What vLLM's engine core does when it starts, reduced to what the scheduler reads: a
VllmConfig (a CPU device; a ModelConfig over a folder holding only a small config.json,
with no tokenizer; the workload's budgets and policy; prefix caching on), a KVCacheConfig
of one full-attention group with the workload's `num_blocks` (block 0 of which vLLM keeps
as its null block), and a block hasher whose hash function is ours (Hashes): a digest of
what vLLM hashes, remembered with the token prefix it names, so that a block's hash can be
read back as the prefix it claims to hold.

vLLM is imported here only: its import takes seconds, and it is paid once per worker
(Build() before the box is entered, a Scheduler per workload inside it).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import inspect
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from schedcheck.engine.store import Report
from schedcheck.engine.trace import DraftStats
from schedcheck.engine.vllm.hybrid import hybrid_config
from schedcheck.engine.vllm.modes import ARCHITECTURE, Mode, v2_only
from schedcheck.engine.vllm.offloading import offloading_config, worker_output
from schedcheck.engine.workload import EOS, EngineRequest, EngineWorkload

# A model vLLM can read a config of without weights: one tiny llama layer. Only the KV
# cache's shape would depend on it, and the KV cache is simulated.
MODEL = {
    "architectures": [ARCHITECTURE],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 1,
    "vocab_size": 256,
    "max_position_embeddings": 1 << 16,
    "torch_dtype": "float32",
    "eos_token_id": EOS,
}
LONGEST = 1 << 15  # the ModelConfig's own max_model_len; each run sets the workload's

# The speculative method each kind of drafter (workload.DRAFTERS) runs as: the n-gram lookup
# (no draft model), a draft model (the target's own tiny config, as a draft), an EAGLE-3
# head (a folder whose name says eagle3, as vLLM's checkpoints' names do: 0.34 picks the
# head's config by it). Each built from a config.json on disk before the box
# (Build.prepare_drafters); a release whose SpeculativeConfig refuses one has no such
# drafter (Build.drafters says why).
METHODS = {"lookup": "ngram", "model": "draft_model", "hidden": "eagle3"}
DRAFT_FOLDERS = {"model": "draft", "hidden": "eagle3-head"}
MOST_DRAFTS = 4  # num_speculative_tokens drawn: 1 to 4 (Features.drafts)

# Read by vLLM when it is imported or configured: quiet logs, no usage reports. (Which model
# runner's protocol the scheduler speaks is set for each Scheduler: its mode.)
ENVIRONMENT = {
    "VLLM_LOGGING_LEVEL": "ERROR",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


class NoSuchMode(RuntimeError):
    """A mode the release does not have (a workload saved from another release, replayed
    here): the run cannot be made, which is no verdict on the engine."""


class Hashes:
    """vLLM's block hash function, ours: sha256 of what vLLM hashes, the digest remembered
    with the prefix it names (`(parent hash, block tokens, extra keys)` chains over the
    whole prefix), and numbered in the order first seen, for a trace a person can read."""

    def __init__(self) -> None:
        self.prefix: dict[bytes, tuple[int, ...]] = {}
        self.number: dict[bytes, int] = {}

    def __call__(self, obj: Any) -> bytes:
        digest = hashlib.sha256(repr(obj).encode()).digest()
        if isinstance(obj, tuple) and len(obj) == 3 and isinstance(obj[1], tuple):
            parent, tokens, _ = obj
            self.prefix.setdefault(digest, self.prefix.get(parent, ()) + tuple(tokens))
        return digest

    def read(self, block_hash: bytes | None) -> tuple[int, tuple[int, ...]]:
        """(its number, the prefix it names) for a block's hash; (-1, ()) for none. vLLM
        stores a block's hash with its KV cache group's id (4 bytes) after it."""
        if block_hash is None:
            return -1, ()
        digest = bytes(block_hash)[:32]
        number = self.number.setdefault(digest, len(self.number))
        return number, self.prefix.get(digest, ())


class Build:
    """vLLM imported and configured once; a Scheduler per workload (`scheduler()`)."""

    def __init__(self, folder: Path) -> None:
        # Applied to every Scheduler built: how the tests make vLLM-API mutants (a block
        # freed twice, a preempted request requeued at the tail, ...) of the real release.
        self.patch: Callable[[Any], None] | None = None
        for key, value in ENVIRONMENT.items():
            os.environ.setdefault(key, value)
        os.environ.setdefault("VLLM_CACHE_ROOT", str(folder / "cache"))
        model = folder / "model"
        model.mkdir(parents=True, exist_ok=True)
        (model / "config.json").write_text(json.dumps(MODEL))
        self.folder = folder
        # the SpeculativeConfig of each (drafter, num_speculative_tokens) that reads a draft
        # model's config from disk, built before the box; what refused, by drafter
        self.spec_configs: dict[tuple[str, int], Any] = {}
        self.refused: dict[str, str] = {}
        self.async_refusals: dict[str, str] = {}  # by method: "" where it runs async
        self.v2_refusals: dict[str, str] = {}  # by method: "" where the v2 runner runs it

        import vllm

        _memory_read_once()
        # vLLM's own warnings about the tiny configs (budgets over max_model_len) are no
        # finding of ours, and a flood in a search
        logging.getLogger("vllm").setLevel(logging.ERROR)
        from vllm.config import (
            CacheConfig,
            DeviceConfig,
            ModelConfig,
            ParallelConfig,
            SchedulerConfig,
            SpeculativeConfig,
            VllmConfig,
        )
        from vllm.sampling_params import SamplingParams
        from vllm.v1.core import kv_cache_utils
        from vllm.v1.core.sched.scheduler import Scheduler

        try:  # where the release has async scheduling (modes.py read that it has)
            from vllm.v1.core.sched.async_scheduler import AsyncScheduler
        except ImportError:
            AsyncScheduler = None
        # LoRA adapters: the server's config and a request's adapter (E25, E23)
        from vllm.config import LoRAConfig
        from vllm.lora.request import LoRARequest
        from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
        from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput
        from vllm.v1.request import Request, RequestStatus
        from vllm.v1.structured_output import StructuredOutputManager

        self.LoRAConfig, self.LoRARequest = LoRAConfig, LoRARequest
        # speculative decoding: its config (the n-gram method: no draft model to load) and
        # what the engine core hands the scheduler the worker's drafts in
        self.SpeculativeConfig, self.ParallelConfig = SpeculativeConfig, ParallelConfig
        self.DraftTokenIds = DraftTokenIds
        self.version: str = vllm.__version__
        # the v1 model runner removed (0.34): its scheduler speaks the v2 protocol alone
        self.v2_only = v2_only(Path(vllm.__file__).parent)
        self.v = _Vllm(
            CacheConfig,
            DeviceConfig,
            SchedulerConfig,
            VllmConfig,
            SamplingParams,
            kv_cache_utils,
            Scheduler,
            FullAttentionSpec,
            KVCacheConfig,
            KVCacheGroupSpec,
            Request,
            RequestStatus,
            StructuredOutputManager,
            ModelRunnerOutput,
            AsyncScheduler,
        )
        # Reads config.json and inspects the model class (a subprocess, cached under
        # VLLM_CACHE_ROOT): the costly part, done once.
        self.model_config = ModelConfig(
            model=str(model),
            tokenizer=str(model),
            skip_tokenizer_init=True,
            max_model_len=LONGEST,
            dtype="float32",
        )
        self.device_config = DeviceConfig(device="cpu")

    def scheduler(self, workload: EngineWorkload, mode: Mode) -> tuple[Any, Hashes]:
        """A fresh vLLM Scheduler for `workload` in `mode`, and the hash function its
        requests use. In async mode an AsyncScheduler, its config's async_scheduling set
        after the config is built (as vLLM's own CPU tests do: a CPU platform's config hook
        may turn it off); the model runner's protocol through vLLM's own switch."""
        v, c = self.v, workload.config
        if mode.overlapped and v.AsyncScheduler is None:
            raise NoSuchMode(f"vLLM {self.version} has no AsyncScheduler (mode {mode.name})")
        # The config is built for the v1 runner: a CPU has no Triton, and a release's config
        # may refuse the v2 runner there (0.32: "Model Runner V2 requires Triton"). The
        # protocol is the Scheduler's own switch, set once it is built: its __init__ reads
        # it into use_v2_model_runner and nothing else of the scheduling path reads it.
        os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "0"
        model_config = copy.copy(self.model_config)
        object.__setattr__(model_config, "max_model_len", workload.max_model_len())
        scheduler_config = v.SchedulerConfig(
            max_num_seqs=c.max_num_seqs,
            max_num_batched_tokens=c.max_num_batched_tokens,
            max_model_len=workload.max_model_len(),
            is_encoder_decoder=False,
            enable_chunked_prefill=True,
            async_scheduling=False,
            policy=c.policy,
        )
        cache_config = v.CacheConfig(block_size=c.block_size, enable_prefix_caching=True)
        if any(layer.state for layer in workload.hybrid()):  # before VllmConfig checks it
            cache_config.mamba_cache_mode = "align"  # as a hybrid Mamba model's hook sets it
            cache_config.mamba_block_size = c.block_size
        speculative = (
            {"speculative_config": self.speculative(workload, model_config)}
            if workload.drafts
            else {}
        )
        if speculative and mode.overlapped:
            self.runs_async(workload, speculative["speculative_config"])
        transfer = (
            {"kv_transfer_config": self.transfer_config(workload)} if workload.connector else {}
        )
        # a server of LoRA adapters, at most max_loras of them among its running requests
        lora = (
            {"lora_config": self.LoRAConfig(max_loras=c.max_adapters, max_lora_rank=8)}
            if c.max_adapters
            else {}
        )
        try:
            vllm_config = v.VllmConfig(
                model_config=model_config,
                cache_config=cache_config,
                scheduler_config=scheduler_config,
                device_config=self.device_config,
                **speculative,
                **transfer,
                **lora,
            )
        except ValueError as e:  # pydantic's ValidationError is one: the release's refusal
            raise NoSuchMode(
                f"vLLM {self.version} refuses this workload's config: "
                f"{str(e).splitlines()[-1 if len(str(e).splitlines()) < 2 else 1].strip()[:300]}"
            ) from None
        if speculative and mode.protocol == "v2":
            self.runs_v2(workload, vllm_config)
        vllm_config.cache_config.num_gpu_blocks = c.num_blocks
        if mode.overlapped:
            vllm_config.scheduler_config.async_scheduling = True
        spec = v.FullAttentionSpec(
            block_size=c.block_size, num_kv_heads=1, head_size=1, dtype=_float32()
        )
        # an offloading connector sizes its tier's chunks from the KV tensors where they
        # are one a layer set (0.2x divides by their bytes), as a server's worker reports
        # them; from their placement rework on (0.33) by the group's page without them
        tensors = []
        if workload.connector == "offloading":
            from vllm.v1.kv_cache_interface import KVCacheTensor

            if "shared_by" in {f.name for f in dataclasses.fields(KVCacheTensor)}:
                size = spec.page_size_bytes * c.num_blocks
                tensors = [KVCacheTensor(size=size, shared_by=["layer.0"])]
        groups: tuple[int, ...] = (0,)
        if workload.layers:  # a hybrid model: its groups laid out by vLLM's planner
            if workload.connector:
                raise NoSuchMode("a hybrid model with a KV connector is not driven yet")
            if (
                workload.drafts
                and workload.drafter == "hidden"
                and any(layer.kind == "chunk" for layer in workload.hybrid())
            ):
                raise NoSuchMode(
                    "vLLM runs chunked local attention with a drafter on the target's hidden "
                    "states without its hybrid KV cache manager (VllmConfig turns it off)"
                )
            kv_cache_config, groups = hybrid_config(workload, vllm_config, spec, NoSuchMode, v)
        else:
            kv_cache_config = v.KVCacheConfig(
                num_blocks=c.num_blocks,
                kv_cache_tensors=tensors,
                kv_cache_groups=[v.KVCacheGroupSpec(["layer.0"], spec)],
            )
        hashes = Hashes()
        v.kv_cache_utils.init_none_hash(hashes)
        scheduler = (v.AsyncScheduler if mode.overlapped else v.Scheduler)(
            vllm_config,
            kv_cache_config,
            v.StructuredOutputManager(vllm_config),
            log_stats=True,  # as its servers run it: the metrics they log are made (E16)
            **({"block_size": c.block_size} if v.takes_block_size else {}),
        )
        if workload.draft_schedule and getattr(scheduler, "dynamic_sd_lookup", None) is None:
            # its config may take the field and its scheduler read none of it (0.11)
            raise NoSuchMode(f"vLLM {self.version}'s Scheduler keeps no draft schedule")
        switch = hasattr(scheduler, "use_v2_model_runner")
        if mode.protocol == "v2" and switch:
            scheduler.use_v2_model_runner = True
        elif mode.protocol == "v2" and not self.v2_only:
            raise NoSuchMode(f"vLLM {self.version}'s Scheduler has no v2 runner protocol")
        elif mode.protocol == "v1" and self.v2_only:
            raise NoSuchMode(f"vLLM {self.version} has no v1 model runner (v2 only)")
        scheduler.schedcheck_groups = groups  # each layer's group: full attention's first
        scheduler.schedcheck_hasher = v.kv_cache_utils.get_request_block_hasher(
            c.block_size, hashes
        )
        if self.patch is not None:
            self.patch(scheduler)
        return scheduler, hashes

    def transfer_config(self, workload: EngineWorkload) -> Any:
        """vLLM's KVTransferConfig for the workload's connector, as users register one of
        their own (both roles; the module path of the class): schedcheck's connector over
        the simulated store (connector.py), its store and each request's plan as extra
        config; vLLM's kv_load_failure_policy the workload's, where the release has it."""
        try:
            from vllm.config import KVTransferConfig
        except ImportError:  # 0.11 keeps it in vllm.config's module, not exported
            from vllm.config.kv_transfer import KVTransferConfig
        fields = {f.name for f in dataclasses.fields(KVTransferConfig)}
        if workload.connector == "offloading":
            return offloading_config(workload, KVTransferConfig, self.chunk_bytes(workload))
        if "kv_connector_module_path" not in fields:
            raise NoSuchMode(f"vLLM {self.version} registers no connector by module path")
        policy = {"kv_load_failure_policy": workload.load_failure}
        if "kv_load_failure_policy" not in fields:
            if workload.load_failure != "recompute" or any(r.load_fails for r in workload.requests):
                raise NoSuchMode(f"vLLM {self.version} has no kv_load_failure_policy")
            policy = {}
        return KVTransferConfig(
            kv_connector="SchedcheckConnector",
            kv_connector_module_path="schedcheck.engine.vllm.connector",
            kv_role="kv_both",
            kv_connector_extra_config={
                "schedcheck": {
                    "stored": [list(p) for p in workload.stored],
                    "loads": {r.name: r.load for r in workload.requests},
                    "saves": {r.name: r.save for r in workload.requests},
                    "waits": {r.name: r.lookup_wait for r in workload.requests},
                    "block_size": workload.config.block_size,
                }
            },
            **policy,
        )

    def has_failure_policy(self) -> bool:
        """Whether the release has a policy for a failed load (kv_load_failure_policy, 0.13
        on): a failing block is drawn only there."""
        try:
            from vllm.config import KVTransferConfig
        except ImportError:  # 0.11 keeps it in vllm.config's module, not exported
            from vllm.config.kv_transfer import KVTransferConfig
        return "kv_load_failure_policy" in {f.name for f in dataclasses.fields(KVTransferConfig)}

    def chunk_bytes(self, workload: EngineWorkload) -> int:
        """The bytes of one chunk of vLLM's CPU tier for our one layer's blocks, padded as
        its CPUOffloadingSpec pads them (to its BLOCK_SIZE_ALIGNMENT)."""
        from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec

        page = self.v.FullAttentionSpec(
            block_size=workload.config.block_size, num_kv_heads=1, head_size=1, dtype=_float32()
        ).page_size_bytes
        # (none before 0.25: a chunk is its blocks' bytes, unpadded)
        align = int(getattr(CPUOffloadingSpec, "BLOCK_SIZE_ALIGNMENT", 1))
        return -(-int(page) // align) * align

    def speculative(self, workload: EngineWorkload, model_config: Any) -> Any:
        """vLLM's SpeculativeConfig for the workload's drafts: its drafter's method
        (METHODS), `num_speculative_tokens` the workload's. The n-gram method is built here
        (its proposer needs no draft model: the config builds from the target's alone); a
        draft model's or head's was built before the box (prepare_drafters), and a drafter
        the release refused is no mode of it (NoSuchMode). The drafts themselves are the
        simulated proposer's (EngineWorkload.propose), handed over as the worker's are; the
        scheduler-visible traits (lookahead slots, EAGLE's block drop, a prefill's
        lookahead) are the release's own, from the config built."""
        schedule = [list(e) for e in workload.draft_schedule]
        if workload.drafter == "lookup":
            try:
                return self.SpeculativeConfig(
                    method="ngram",
                    num_speculative_tokens=workload.drafts,
                    prompt_lookup_max=workload.drafts,
                    prompt_lookup_min=1,
                    target_model_config=model_config,
                    target_parallel_config=self.ParallelConfig(),
                    **({"num_speculative_tokens_per_batch_size": schedule} if schedule else {}),
                )
            except (TypeError, ValueError) as e:  # no such field before 0.33: no such mode
                if not schedule:
                    raise
                raise NoSuchMode(
                    f"vLLM {self.version} takes no draft schedule by batch size: "
                    f"{str(e).splitlines()[0][:200]}"
                ) from None
        key = (workload.drafter, workload.drafts)
        if key not in self.spec_configs:
            why = self.refused.get(workload.drafter, "not prepared before the run")
            raise NoSuchMode(
                f"vLLM {self.version} has no {workload.drafter} drafter "
                f"({METHODS.get(workload.drafter)}) with {workload.drafts} drafts: {why}"
            )
        made = copy.copy(self.spec_configs[key])
        if schedule:
            if not hasattr(made, "num_speculative_tokens_per_batch_size"):
                raise NoSuchMode(f"vLLM {self.version} takes no draft schedule by batch size")
            # built before the box for a fixed length; the schedule is data the scheduler
            # reads when built (its dense lookup, validated there)
            object.__setattr__(made, "num_speculative_tokens_per_batch_size", schedule)
        return made

    def runs_async(self, workload: EngineWorkload, speculative: Any) -> None:
        """NoSuchMode where the release's config refuses async scheduling with this
        drafter's method (its own words), and not without drafts: the refusal is the
        release's, read by building its VllmConfig both ways once per method. (The runs
        themselves set async_scheduling after the config is built, as vLLM's CPU tests do,
        so a refusal must be asked for.)"""
        method = METHODS[workload.drafter]
        if method not in self.async_refusals:
            self.async_refusals[method] = self._refusal(speculative)
            if self.async_refusals[method] and self._refusal(None):
                self.async_refusals[method] = ""  # refused without drafts too: not the method's
        if self.async_refusals[method]:
            raise NoSuchMode(
                f"vLLM {self.version} does not run {method} drafts under async scheduling: "
                f"{self.async_refusals[method]}"
            )

    def runs_v2(self, workload: EngineWorkload, vllm_config: Any) -> None:
        """NoSuchMode where the release's v2 model runner does not run this drafter's method:
        what its config lists as unsupported by the v2 runner
        (`_get_v2_model_runner_unsupported_features`, 0.2x: 0.22.1 runs only EAGLE and MTP
        there) and does not list without drafts. A release that keeps no list (0.34: the
        v2 runner alone) runs every method it builds."""
        unsupported = getattr(vllm_config, "_get_v2_model_runner_unsupported_features", None)
        method = METHODS[workload.drafter]
        if unsupported is None or method in self.v2_refusals:
            if self.v2_refusals.get(method):
                raise NoSuchMode(self.v2_refusals[method])
            return
        plain = copy.copy(vllm_config)
        object.__setattr__(plain, "speculative_config", None)
        added = [
            u
            for u in unsupported()
            if u not in set(plain._get_v2_model_runner_unsupported_features())
        ]
        self.v2_refusals[method] = (
            f"vLLM {self.version}'s v2 model runner does not run {method} drafts: it lists "
            f"{'; '.join(added)} as unsupported"
            if added
            else ""
        )
        if added:
            raise NoSuchMode(self.v2_refusals[method])

    def _refusal(self, speculative: Any) -> str:
        v = self.v
        try:
            v.VllmConfig(
                model_config=copy.copy(self.model_config),
                cache_config=v.CacheConfig(block_size=16, enable_prefix_caching=True),
                scheduler_config=v.SchedulerConfig(
                    max_num_seqs=4,
                    max_num_batched_tokens=64,
                    max_model_len=64,
                    is_encoder_decoder=False,
                    enable_chunked_prefill=True,
                    async_scheduling=True,
                ),
                device_config=self.device_config,
                **({} if speculative is None else {"speculative_config": speculative}),
            )
        except Exception as e:  # its config's refusal, in its words
            return f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        return ""

    def prepare_drafters(self) -> None:
        """Build the SpeculativeConfig of each drafter with a model of its own, for 1 to
        MOST_DRAFTS drafts, while the draft's config.json can be read (before the box; the
        first of each method inspects its model class in a subprocess, seconds, cached
        under VLLM_CACHE_ROOT). A method the release's config refuses is recorded in
        `refused`, with its message: no drafter of that kind is drawn (`drafters`)."""
        for drafter, folder_name in DRAFT_FOLDERS.items():
            if drafter in self.refused or (drafter, 1) in self.spec_configs:
                continue
            draft = self.folder / folder_name
            draft.mkdir(parents=True, exist_ok=True)
            (draft / "config.json").write_text(json.dumps(MODEL))
            try:
                for k in range(1, MOST_DRAFTS + 1):
                    self.spec_configs[drafter, k] = self.SpeculativeConfig(
                        method=METHODS[drafter],
                        model=str(draft),
                        num_speculative_tokens=k,
                        target_model_config=self.model_config,
                        target_parallel_config=self.ParallelConfig(),
                    )
            except Exception as e:  # the release's own refusal: its verdict on the method
                self.refused[drafter] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                for k in range(1, MOST_DRAFTS + 1):
                    self.spec_configs.pop((drafter, k), None)

    @property
    def drafters(self) -> tuple[str, ...]:
        """The kinds of drafter this release runs (workload.DRAFTERS), once prepared."""
        return ("lookup", *(d for d in DRAFT_FOLDERS if (d, 1) in self.spec_configs))

    def drafts(self, proposed: dict[str, tuple[int, ...]]) -> Any:
        """The DraftTokenIds the engine core gives update_draft_token_ids() after a step
        (`post_step`, sync scheduling): the worker's drafts for each request of the step."""
        return self.DraftTokenIds(list(proposed), [list(d) for d in proposed.values()])

    @staticmethod
    def draft_stats(outputs: Any) -> DraftStats | None:
        """The SpecDecodingStats an update returned (on one of its EngineCoreOutputs, in
        its SchedulerStats), as plain numbers; None where it returned none. A count by
        position the release does not keep (0.11: drafts by position) is ()."""
        for made in (outputs or {}).values():
            spec = getattr(getattr(made, "scheduler_stats", None), "spec_decoding_stats", None)
            if spec is not None:
                return DraftStats(
                    int(spec.num_draft_tokens),
                    int(spec.num_accepted_tokens),
                    tuple(int(n) for n in getattr(spec, "num_draft_tokens_per_pos", ())),
                    tuple(int(n) for n in getattr(spec, "num_accepted_tokens_per_pos", ())),
                )
        return None

    def request(
        self,
        scheduler: Any,
        request: EngineRequest,
        arrival: float,
        prompt: tuple[int, ...] | None = None,
        resumable: bool | None = None,
    ) -> Any:
        """vLLM's Request for one of the workload's: its sampling parameters (max_tokens,
        ignore_eos, stop tokens, eos from the model's generation config), its priority and
        arrival time, our block hasher. A session's (issue 50) is `resumable`; its client
        sends each continuation chunk (`prompt`) as another resumable Request of the same id,
        and its close as one that is not (AsyncLLM's `_add_streaming_input_request`)."""
        resumable = request.session if resumable is None else resumable
        params = self.v.SamplingParams(
            max_tokens=request.max_tokens,
            ignore_eos=request.ignore_eos,
            stop_token_ids=list(request.stop),
            temperature=1.0,
        )
        # positional: 0.11 names the parameter model_eos_token_id, later ones eos_token_id
        params.update_from_generation_config({}, EOS)
        # In 0.11 the eos is the Request's own (check_stop compares it), not the
        # sampling parameters'
        eos = {"eos_token_id": EOS} if self.v.request_eos else {}
        if request.session and not self.v.sessions:
            raise NoSuchMode(f"vLLM {self.version} has no streaming-input sessions (resumable)")
        # its LoRA adapter (an id of its own per name, the path never read: the scheduler
        # and the block hasher read the id and the name) and its cache namespace (the
        # hasher salts its first block's hash with it)
        adapter = (
            self.LoRARequest(request.adapter, adapter_id(request.adapter), "/nonexistent")
            if request.adapter
            else None
        )
        return self.v.Request(
            request.name,
            list(request.prompt if prompt is None else prompt),
            params,
            None,
            arrival_time=arrival,
            priority=request.priority,
            block_hasher=scheduler.schedcheck_hasher,
            lora_request=adapter,
            cache_salt=request.namespace or None,
            **eos,
            **({"resumable": resumable} if self.v.sessions else {}),
        )

    def runner_output(
        self, order: list[str], sampled: dict[str, tuple[int, ...]], report: Report | None = None
    ) -> Any:
        """The ModelRunnerOutput of a step: the tokens each request in `sampled` got (one;
        with drafts, those verified and one of the model's own), none for the others
        scheduled (a chunk short of the end); with a connector, what its worker reports
        (the KVConnectorOutput every step carries, an empty one too)."""
        tokens: list[Any] = [list(sampled[n]) if n in sampled else [] for n in order]
        if self.v.sampled_arrays:  # 0.11's scheduler calls .tolist() on each
            import numpy

            tokens = [numpy.array(t, dtype=numpy.int64) for t in tokens]
        index = {name: i for i, name in enumerate(order)}
        return self.v.ModelRunnerOutput(
            req_ids=list(order),
            sampled_token_ids=tokens,
            **({"req_id_to_index": index} if self.v.takes_index else {}),
            **self.v.runner_output_required,
            **({} if report is None else {"kv_connector_output": self.connector_output(report)}),
        )

    @staticmethod
    def connector_output(report: Report) -> Any:
        """The worker's KVConnectorOutput: requests whose save and whose load ended, and the
        blocks whose load failed (vLLM's invalid_block_ids); an offloading connector's
        worker, the jobs that ended (offloading.worker_output)."""
        from vllm.v1.outputs import KVConnectorOutput

        if report.jobs:
            from vllm.distributed.kv_transfer.kv_connector.v1.offloading.common import (
                OffloadingWorkerMetadata,
            )

            return worker_output(report, KVConnectorOutput, OffloadingWorkerMetadata)
        return KVConnectorOutput(
            finished_sending=set(report.saved) or None,
            finished_recving=set(report.loaded) or None,
            invalid_block_ids=set(report.failed_blocks),
        )

    def reset(self, scheduler: Any) -> bool:
        """The prefix cache cleared as the release's engine core does it; whether its
        running requests were preempted (their output in flight then dropped)."""
        if self.v.resets_running:
            scheduler.reset_prefix_cache(reset_running_requests=True)
            return True
        scheduler.reset_prefix_cache()
        return False

    def aborted(self) -> Any:
        return self.v.RequestStatus.FINISHED_ABORTED


def adapter_id(name: str) -> int:
    """A LoRA adapter's id, from its name (1 to 7 ASCII letters and digits:
    EngineWorkload.problems), one id per name and the same in every process: positive, as
    vLLM's ids of adapters are (0 is none), and within 64 bits."""
    return int.from_bytes(name.encode(), "big")


class _Vllm:
    """The vLLM names a build uses, imported once."""

    def __init__(self, *names: Any) -> None:
        (
            self.CacheConfig,
            self.DeviceConfig,
            self.SchedulerConfig,
            self.VllmConfig,
            self.SamplingParams,
            self.kv_cache_utils,
            self.Scheduler,
            self.FullAttentionSpec,
            self.KVCacheConfig,
            self.KVCacheGroupSpec,
            self.Request,
            self.RequestStatus,
            self.StructuredOutputManager,
            self.ModelRunnerOutput,
            self.AsyncScheduler,
        ) = names
        # What differs between releases, found by looking, not by version number:
        # - 0.11's Request takes the model's eos as eos_token_id;
        self.request_eos: bool = "eos_token_id" in inspect.signature(self.Request).parameters
        # - 0.15 on: a Request may be resumable (streaming-input sessions)
        self.sessions: bool = "resumable" in inspect.signature(self.Request).parameters
        # - 0.11's ModelRunnerOutput's sampled_token_ids are numpy arrays, and its
        #   logprobs, prompt_logprobs_dict and pooler_output have no default: empty ones.
        # - before reset_running_requests (0.11 to 0.1x), the prefix cache is cleared only
        #   where no request holds a block (it returns False otherwise): its endpoint's
        #   behaviour, which the driver plays;
        # - 0.11.0's Scheduler reads the block size off the cache config (no block_size);
        self.takes_block_size: bool = "block_size" in inspect.signature(self.Scheduler).parameters
        # a hybrid model's layer specs and vLLM's planner (hybrid.py), imported now: never
        # for the first time in a box, whose uid may read nothing new
        from vllm.v1.kv_cache_interface import (
            ChunkedLocalAttentionSpec,
            MambaSpec,
            SlidingWindowSpec,
        )

        self.SlidingWindowSpec, self.ChunkedLocalAttentionSpec, self.MambaSpec = (
            SlidingWindowSpec,
            ChunkedLocalAttentionSpec,
            MambaSpec,
        )
        try:  # 0.34: planning moved out of kv_cache_utils
            from vllm.v1.core import kv_cache_planning
        except ImportError:
            kv_cache_planning = None
        self.kv_cache_planning: Any = kv_cache_planning
        reset = inspect.signature(self.Scheduler.reset_prefix_cache).parameters
        self.resets_running: bool = "reset_running_requests" in reset
        fields = {f.name: f for f in dataclasses.fields(self.ModelRunnerOutput)}
        self.sampled_arrays: bool = "ndarray" in str(fields["sampled_token_ids"].type)
        # up to 0.33 the output maps each request to its row (req_id_to_index); 0.34 has
        # the scheduler derive it from req_ids
        self.takes_index: bool = "req_id_to_index" in fields
        empty: dict[str, Any] = {"logprobs": None, "prompt_logprobs_dict": {}, "pooler_output": []}
        self.runner_output_required: dict[str, Any] = {
            name: value
            for name, value in empty.items()
            if name in fields
            and fields[name].default is dataclasses.MISSING
            and fields[name].default_factory is dataclasses.MISSING
        }


def _memory_read_once() -> None:
    """0.11's VllmConfig checks its swap space against the machine's memory, which it reads
    from /proc/meminfo on each build: a worker's box hides /proc. Read it once, here, before
    the box is entered. Later releases read it in no config a workload builds."""
    import importlib

    cache = importlib.import_module("vllm.config.cache")
    read = getattr(cache, "get_cpu_memory", None)
    if callable(read):
        total = read()
        cache.get_cpu_memory = lambda: total  # type: ignore[attr-defined]


def _float32() -> Any:
    import torch

    return torch.float32
