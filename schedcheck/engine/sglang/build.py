"""SGLang's real `Scheduler`, built on a CPU for a model of no weights (docs/engines.md,
"SGLang"): what SGLang itself runs, and the few places a CPU harness stands in for a GPU
server (read in SGLang 0.5.23; docs/notes/sglang-scheduler-on-a-cpu.md).

`Scheduler.__init__` runs for real (its policy, its radix tree over the real pools, its
process groups on loopback, world size one), with four things replaced, each at its narrowest:

- `Scheduler.init_model_worker`: no model is loaded; the worker it would make holds the real
  pools (`ReqToTokenPool`, a one-layer `MHATokenToKVPool`, the token or paged allocator,
  sized as SGLang sizes them) and the simulated model as its `forward_batch_generation`; the
  scheduler's fields it sets from the worker are set as it sets them.
- `SchedulerIpcChannels.create`: in-memory queues instead of zmq sockets; requests still go
  in through SGLang's own wire encoding (`sock_send`) and its real request receiver, and
  outputs come out as the `BatchTokenIDOutput` objects its detokenizer would read.
- the parallel runtime's setup runs once per process (it refuses a second run); later
  schedulers use the first one's process groups.
- the scheduler's watchdog: a thread per scheduler that never lets it go and, a scheduler
  left mid-run for five minutes, sends SIGQUIT to the parent process.

Two readings of the host are made once, by the first scheduler, before the box (where no
/proc is): the ports its launcher picks (`PortArgs.init_new`: they are used by the parallel
setup alone, which runs once) and the machine's memory (`get_cpu_memory_capacity`, which
sizes nothing here: the pool's size is given). The runtime config is process-global in
SGLang: one scheduler lives at a time.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from array import array
from collections import deque
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

from schedcheck.engine.sglang import spec, standins
from schedcheck.engine.workload import EOS, EngineConfig, EngineRequest

__all__ = ["Build", "Channels", "Model", "keyed", "server_args"]

Model = Callable[[Any], list[int]]  # the simulated model: a ScheduleBatch -> a token per request
CONTEXT = 4096  # the model's context length: above any request, so the pool is what limits


class Queue:
    """Stands for one zmq socket of the scheduler's: send() queues, a non-blocking recv()
    pops or raises zmq.Again, as zmq does."""

    def __init__(self, again: type[Exception]) -> None:
        self.items: deque[Any] = deque()
        self.again = again

    def send(self, data: Any, flags: int = 0, copy: bool = True, track: bool = False) -> None:
        self.items.append(bytes(data))

    def recv(self, flags: int = 0, copy: bool = True, track: bool = False) -> Any:
        if not self.items:
            raise self.again()
        return self.items.popleft()

    def send_pyobj(self, obj: Any, flags: int = 0, protocol: int | None = None) -> None:
        self.items.append(obj)

    def recv_pyobj(self, flags: int = 0) -> Any:
        return self.recv()

    def poll(self, timeout: int | None = None, flags: int = 0) -> int:
        return 1 if self.items else 0

    def close(self, linger: int | None = None) -> None:
        pass


class Channels:
    """A scheduler's four channels: the tokenizer's inbox, the RPC inbox, and what it sends
    to the detokenizer and back to the tokenizer."""

    def __init__(self, again: type[Exception]) -> None:
        self.inbox, self.rpc = Queue(again), Queue(again)
        self.detokenizer, self.tokenizer = Queue(again), Queue(again)


class Build:
    """SGLang imported (its stand-ins first), patched where a CPU harness must be, and the
    tiny model's config written: schedulers are built from it, one per run."""

    def __init__(self) -> None:
        # the tree's Python core: its nodes can be walked (the compiled core's cannot), and
        # its trajectory is the compiled one's (docs/notes/sglang-scheduler-on-a-cpu.md)
        os.environ["SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND"] = "python"
        standins.install()
        import sglang
        import torch
        import zmq
        from sglang.srt.distributed import bootstrap
        from sglang.srt.managers import io_struct
        from sglang.srt.managers import scheduler as module
        from sglang.srt.managers.scheduler_components import ipc_channels
        from sglang.srt.utils import common, watchdog

        torch.set_num_threads(1)
        self.version = str(getattr(sglang, "__version__", "of unknown version"))
        self.torch, self.io, self.module, self.zmq = torch, io_struct, module, zmq
        self.again = zmq.Again
        self.channels: Channels | None = None  # the live scheduler's
        self.ports: Any = None  # the first scheduler's PortArgs
        # a change made to each scheduler built, before its first step (a mutant's, in
        # schedcheck's own tests: tests/engine_subjects/sglang/mutants.py)
        self.patch: Callable[[Any], None] | None = None
        self.model: Model | None = None  # the live scheduler's simulated model
        self.verify: spec.Verify | None = None  # and its verify of drafts (spec.py)
        self.folder = Path(tempfile.gettempdir()) / f"schedcheck-sglang-{os.getuid()}"
        # (its own model folder: a box's /tmp is its own, so it is written where it runs)

        done: list[bool] = []
        # the parallel setup, once per process: 0.5.21 on, Scheduler.__init__ calls it;
        # before, the model runner did (init_torch_distributed), and init_model_worker here
        # stands in for the model runner (self.distributed)
        self.distributed: Callable[[Any], None] | None = None
        if hasattr(bootstrap, "init_parallel_runtime"):
            real_parallel = bootstrap.init_parallel_runtime

            def parallel_once(**kwargs: Any) -> None:
                if not done:
                    real_parallel(**kwargs)
                    done.append(True)

            bootstrap.init_parallel_runtime = parallel_once
        else:
            real_distributed = bootstrap.init_torch_distributed

            def distributed_once(scheduler: Any) -> None:
                """ModelRunner.init_torch_distributed's call, for a CPU rank of one."""
                if not done:
                    real_distributed(
                        server_args=scheduler.server_args,
                        model_config=scheduler.model_config,
                        device="cpu",
                        ps=scheduler.ps,
                        dist_port=scheduler.nccl_port,
                        is_draft_worker=False,
                        local_omp_cpuid=None,  # read only with AMX or on arm64
                    )
                    done.append(True)

            self.distributed = distributed_once
        build = self

        def channels(cls: Any, /, **kwargs: Any) -> Any:
            from sglang.srt.managers.scheduler_components.output_sender import SenderWrapper

            made = Channels(build.again)
            build.channels = made
            return cls(
                recv_from_tokenizer=made.inbox,
                recv_from_rpc=made.rpc,
                send_to_tokenizer=SenderWrapper(made.tokenizer),
                send_to_detokenizer=SenderWrapper(made.detokenizer),
                send_metrics_from_scheduler=None,
            )

        ipc_channels.SchedulerIpcChannels.create = classmethod(channels)
        module.create_scheduler_watchdog = lambda *a, **k: watchdog._WatchdogNoop()
        common.get_cpu_memory_capacity = functools.cache(common.get_cpu_memory_capacity)
        module.Scheduler.init_model_worker = _init_model_worker(self)
        spec.install(module, self.live_verify)

    def live_verify(self) -> spec.Verify:
        assert self.verify is not None
        return self.verify

    def model_path(self) -> str:
        """The tiny llama's folder (a config, no weights), written where this process runs."""
        config = self.folder / "config.json"
        if not config.is_file():
            self.folder.mkdir(parents=True, exist_ok=True)
            config.write_text(json.dumps(TINY_LLAMA))
        return str(self.folder)

    def scheduler(
        self,
        config: EngineConfig,
        overlap: bool,
        model: Model,
        drafts: int = 0,
        verify: spec.Verify | None = None,
        sessions: bool = False,
    ) -> tuple[Any, Channels]:
        """A fresh Scheduler for `config` (a KV page per block, block 0 SGLang's padding
        page), in the overlap loop or the normal one, computing with `model`; with EAGLE
        drafting a chain of `drafts` a step where `drafts`, verified by `verify`
        (spec.py); with streaming sessions on where `sessions`
        (`--enable-streaming-session`)."""
        from sglang.srt import runtime_context
        from sglang.srt.server_args import PortArgs, ServerArgs

        slots = (config.num_blocks - 1) * config.block_size
        args = ServerArgs(
            **server_args(config),
            **spec.spec_args(drafts),
            model_path=self.model_path(),
            device="cpu",
            page_size=config.block_size,
            chunked_prefill_size=config.max_num_batched_tokens,
            max_prefill_tokens=config.max_num_batched_tokens,
            max_running_requests=config.max_num_seqs,
            max_total_tokens=slots,
            disable_overlap_schedule=not overlap,
            skip_tokenizer_init=True,
            load_format="dummy",
            sleep_on_idle=False,
            disable_cuda_graph=True,
            schedule_conservativeness=config.conservativeness,
            **({"enable_streaming_session": True} if sessions else {}),
        )
        if self.ports is None:
            self.ports = PortArgs.init_new(args)
        self.model, self.verify = model, verify
        if hasattr(runtime_context, "SpawnRanks"):  # 0.5.21 on: the ranks published
            rank = runtime_context.spawn_world_rank(args, tp_rank=0, pp_rank=0)
            ranks = runtime_context.SpawnRanks(world_rank=rank, dp_rank=None, gpu_id=0)
            runtime_context.publish(args, role="scheduler", ranks=ranks)
            scheduler = self.module.Scheduler(args, self.ports)
        else:  # before: run_scheduler_process publishes, and the ranks are arguments
            runtime_context.publish(args, role="scheduler")
            # gpu_id, tp_rank, moe_ep_rank, pp_rank, attn_cp_rank, moe_dp_rank, dp_rank
            scheduler = self.module.Scheduler(args, self.ports, 0, 0, 0, 0, 0, 0, None)
        assert self.channels is not None
        if overlap:  # what event_loop_overlap and run_event_loop set before their loop
            if hasattr(scheduler, "enable_skip_finishing_decode"):  # 0.5.20 on
                scheduler.enable_skip_finishing_decode = True
            scheduler.result_queue = deque()
        # run_event_loop's: a write-after-read barrier for CUDA streams only
        scheduler._war_barrier_enabled = False
        if self.patch is not None:
            self.patch(scheduler)
        return scheduler, self.channels

    def request(
        self, request: EngineRequest, priorities: bool = False, chunk: tuple[int, ...] = ()
    ) -> Any:
        """The request as SGLang's tokenizer manager sends it (`_create_tokenized_object`):
        token ids, greedy sampling params normalized and verified for the vocabulary; its
        priority where the server schedules by priority (`priorities`), as a client of such
        a server sends one. A session's turn is a request of its streaming session (the
        session's id is the request's name: `session_params`), of its prompt, or of
        `chunk` after its first (the session puts its history before it)."""
        from sglang.srt.sampling.sampling_params import SamplingParams

        params = SamplingParams(
            max_new_tokens=request.max_tokens,
            ignore_eos=request.ignore_eos,
            stop_token_ids=list(request.stop) or None,
            temperature=0.0,
        )
        params.normalize(None)
        params.verify(TINY_LLAMA["vocab_size"])
        return self.io.TokenizedGenerateReqInput(
            rid=request.name,
            input_text=None,
            input_ids=array("q", chunk or request.prompt),
            input_embeds=None,
            token_type_ids=None,
            mm_inputs=None,
            sampling_params=params,
            # its prompt's logprobs from a position on, where its client asks them
            return_logprob=request.logprobs_from >= 0,
            logprob_start_len=request.logprobs_from,
            top_logprobs_num=0,
            token_ids_logprob=None,
            stream=request.stream,
            priority=request.priority if priorities else None,
            # its cache namespace: the tree keys its nodes by it (RadixKey's extra_key or
            # cache_salt: `keyed`)
            **keyed(request.namespace),
            session_params=self.io.SessionParams(id=request.name) if request.session else None,
            # its LoRA adapter: the scheduler admits by it, and joins it to the extra key
            lora_id=request.adapter or None,
            routing_key=request.routing_key or None,
            **self._embeds(request),
        )

    def _embeds(self, request: EngineRequest) -> dict[str, Any]:
        """A prompt carrying embeddings of its own (EngineRequest.embeds), as a client
        sends one (`positional_embed_overrides`: an embedding to put at its first
        position; the simulated model reads none, what counts is that the request's KV
        is not its tokens' alone). Nothing for a request without, so that a release
        whose requests have no such field is sent what it reads."""
        if not request.embeds:
            return {}
        from sglang.srt.managers.embed_types import PositionalEmbeds

        hidden = self.torch.zeros(1, TINY_LLAMA["hidden_size"])
        return {"positional_embed_overrides": PositionalEmbeds(embeds=hidden, positions=[0])}

    def open_session(self, name: str) -> Any:
        """A streaming session of id `name`, as a client opens one (`/open_session` with
        `streaming`): its turns hold its KV between them."""
        return self.io.OpenSessionReqInput(
            capacity_of_str_len=CONTEXT, session_id=name, streaming=True
        )

    def close_session(self, name: str) -> Any:
        return self.io.CloseSessionReqInput(session_id=name)

    def send(self, channels: Channels, message: Any) -> None:
        """Into the scheduler's inbox, as the tokenizer manager sends (its wire encoding)."""
        self.io.sock_send(channels.inbox, message)

    def abort(self, name: str) -> Any:
        return self.io.AbortReq(rid=name)

    def received(self, channels: Channels) -> list[Any]:
        """What the scheduler sent the detokenizer and the tokenizer since the last call."""
        out = []
        for queue in (channels.detokenizer, channels.tokenizer):
            while queue.items:
                out.append(self.io.sock_recv(queue, self.zmq.NOBLOCK))
        return out


def keyed(namespace: str) -> dict[str, str | None]:
    """A cache namespace as a client of SGLang sends one: its request's `extra_key` or its
    `cache_salt`, the two fields the radix tree keys its nodes by (RadixKey, each compared
    apart: `_check_compatible`); which, by its name (the last letter's code even:
    extra_key, odd: cache_salt), so that the workloads' namespaces use both."""
    if not namespace:
        return {"extra_key": None, "cache_salt": None}
    salted = ord(namespace[-1]) % 2 == 1
    return {
        "extra_key": None if salted else namespace,
        "cache_salt": namespace if salted else None,
    }


LORA = {"enable_lora": True, "max_lora_rank": 8, "lora_target_modules": ["q_proj", "v_proj"]}
"""A server of LoRA adapters loaded at run time (no `--lora-paths`: a rank and the modules
are what it then needs); the adapters' weights never matter here, only their ids."""


def server_args(config: EngineConfig) -> dict[str, Any]:
    """The server's scheduling arguments a workload sets beyond the budgets: mixed chunks
    (`enable_mixed_chunk`), a queue limit (`max_queued_requests`, none at 0), LoRA adapters
    where the workload serves them (LORA, `max_loras_per_batch`), and its
    policy (workload.POLICIES): SGLang's `schedule_policy`, and for "priority" fcfs with
    priority scheduling on, lower values first (the workload's order), preempting for
    priority by more than `preempt_gap` (`priority_scheduling_preemption_threshold`) or
    not at all (-1: `disable_priority_preemption`)."""
    limits = {
        # the seed the scheduler sets (`set_random_seed`): the random policy's order is the
        # same in every run of a workload
        "random_seed": 0,
        "enable_mixed_chunk": config.mixed,
        "max_queued_requests": config.max_queued or None,
        **(LORA | {"max_loras_per_batch": config.max_adapters} if config.max_adapters else {}),
    }
    if config.policy != "priority":
        return {**limits, "schedule_policy": config.policy}
    preempts = config.preempt_gap >= 0
    retraction = {"retraction_policy": "priority"} if config.retract_by_priority else {}
    return {
        **limits,
        "schedule_policy": "fcfs",
        "enable_priority_scheduling": True,
        "schedule_low_priority_values_first": True,
        "disable_priority_preemption": not preempts,
        "priority_scheduling_preemption_threshold": max(config.preempt_gap, 0),
        **retraction,
    }


TINY_LLAMA: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 16,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 8,
    "max_position_embeddings": CONTEXT,
    "rms_norm_eps": 1e-5,
    "bos_token_id": 1,
    "eos_token_id": EOS,
    "torch_dtype": "float32",
    "tie_word_embeddings": False,
}


class _Worker:
    """What the scheduler reads of its TP worker; `forward_batch_generation` is the
    simulated model."""

    is_hybrid_swa = False
    sliding_window_size = None
    weight_load_time = 0.0
    graph_time_usage: MappingProxyType[str, float] = MappingProxyType({})  # read only
    graph_memory_usage: MappingProxyType[str, float] = MappingProxyType({})
    preloaded_weights_bytes = 0
    model_runner_list = None

    def __init__(self, build: Build, runner: Any, model_config: Any) -> None:
        self.build, self.model_runner, self.model_config = build, runner, model_config

    def get_memory_pool(self) -> tuple[Any, Any]:
        return self.model_runner.req_to_token_pool, self.model_runner.token_to_kv_pool_allocator

    def get_pad_input_ids_func(self) -> None:
        return None

    def get_tokens_per_layer_info(self) -> tuple[int, None]:
        return self.model_runner.max_total_num_tokens, None

    def forward_batch_generation(self, batch: Any, pp_proxy_tensors: Any = None, **_: Any) -> Any:
        from sglang.srt.managers.utils import GenerationBatchResult

        assert self.build.model is not None
        tokens = self.build.torch.tensor(self.build.model(batch), dtype=self.build.torch.int64)
        return GenerationBatchResult(
            logits_output=self.logprobs(batch) if batch.return_logprob else None,
            next_token_ids=tokens,
            can_run_cuda_graph=False,
        )

    def logprobs(self, batch: Any) -> Any:
        """What the logits processor returns where the batch asks logprobs: one for each
        request's next token, and for an extend one for each input position from its
        logprob start (`extend_logprob_start_lens`, as SGLang counts them: the extend less
        its start). The values are the simulated model's: 0, its token is certain."""
        from sglang.srt.layers.logits_processor import LogitsProcessorOutput

        torch, bs = self.build.torch, len(batch.reqs)
        inputs = None
        if batch.forward_mode.is_extend():
            starts = batch.extend_logprob_start_lens
            count = sum(n - s for n, s in zip(batch.extend_lens, starts, strict=True))
            inputs = torch.zeros(count, dtype=torch.float32)
        return LogitsProcessorOutput(
            next_token_logits=None,
            next_token_logprobs=torch.zeros(bs, dtype=torch.float32),
            input_token_logprobs=inputs,
        )


def _lora_manager(lora: Any) -> Any:
    """What the scheduler asks of the model runner's LoRA manager where the server serves
    adapters (`can_schedule_lora_req`): SGLang's own `LoRAManager.validate_lora_batch`, on
    a manager of no weights and no pinned adapters holding `max_loras_per_batch` slots;
    None where it serves none (as the model runner has it)."""
    if not lora.enable_lora:
        return None
    from sglang.srt.lora.lora_manager import LoRAManager

    slots = int(lora.max_loras_per_batch)
    manager: Any = _Runner(
        max_loras_per_batch=slots,
        num_pinned_loras=0,
        lora_refs={},
        memory_pool=_Runner(max_loras_per_batch=slots),
    )
    manager.validate_lora_batch = functools.partial(LoRAManager.validate_lora_batch, manager)
    return manager


class _Runner:
    """The model runner's fields the scheduler reads (recorded by running it, 0.5.23)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _init_model_worker(build: Build) -> Callable[[Any], None]:
    def init_model_worker(self: Any) -> None:
        """Scheduler.init_model_worker without a model: the real pools, sized as SGLang's
        KV cache configurator sizes them for these arguments."""
        torch = build.torch
        from sglang.srt.layers import dp_attention
        from sglang.srt.mem_cache.allocation_sizing import get_req_to_token_extra_context_len
        from sglang.srt.mem_cache.allocator import (
            PagedTokenToKVPoolAllocator,
            TokenToKVPoolAllocator,
        )
        from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool
        from sglang.srt.model_executor.model_runner_components.ngram_embedding_manager import (
            NgramEmbeddingManager,
        )
        from sglang.srt.runtime_context import (
            get_context,
            get_device,
            get_lora,
            get_parallel,
            get_schedule,
        )
        from sglang.srt.utils.common import set_random_seed

        if build.distributed is not None:
            build.distributed(self)
        config, page = self.model_config, self.page_size
        slots = get_schedule().max_total_tokens
        # resolve_max_num_reqs, max_running_requests given: at most half the tokens
        rows = min(max(1, get_schedule().max_running_requests), slots // 2)
        row_pool = ReqToTokenPool(
            size=rows,
            max_context_len=config.context_len + get_req_to_token_extra_context_len(),
            device="cpu",
            enable_memory_saver=False,
        )
        kv = MHATokenToKVPool(
            slots,
            page_size=page,
            dtype=torch.float32,
            head_num=1,
            head_dim=config.head_dim,
            layer_num=1,
            device="cpu",
            enable_memory_saver=False,
            enable_alt_stream=False,
        )
        if page == 1:
            allocator = TokenToKVPoolAllocator(
                slots, dtype=torch.float32, device="cpu", kvcache=kv, need_sort=False
            )
        else:
            allocator = PagedTokenToKVPoolAllocator(
                slots,
                page_size=page,
                dtype=torch.float32,
                device="cpu",
                kvcache=kv,
                need_sort=False,
            )
        runner: Any = _Runner(
            model_config=config,
            device="cpu",
            req_to_token_pool=row_pool,
            token_to_kv_pool=kv,
            token_to_kv_pool_allocator=allocator,
            max_total_num_tokens=slots,
            logical_max_total_num_tokens=slots,
            effective_logical_max_total_num_tokens=slots,
            max_running_requests=rows,
            forward_stream=torch.cpu.Stream(),
            attn_backend=_Runner(),
            prefill_aware_swa=False,
            lora_manager=_lora_manager(get_lora()),
            canary_manager=None,
            hisparse_coordinator=None,
            mtp_draft_device_pools=(),
            mtp_draft_mamba_pools=(),
            is_hybrid_swa=False,
            sliding_window_size=None,
            memory_pool_config=None,
            weight_load_mem_usage=0.0,
            ngram_embedding_manager=NgramEmbeddingManager.from_model(
                model=None,
                model_config=config,
                req_to_token_pool=row_pool,
                max_running_requests=rows,
                device="cpu",
            ),
        )
        self.tp_worker = _Worker(build, runner, config)
        self.maybe_init_draft_worker()  # no draft, or the simulated one (spec.py)
        self.kv_cache_allocation_time = 0.0
        self.schedule_stream = torch.cpu.Stream()
        self.model_worker = self.draft_worker or self.tp_worker
        # get_worker_info()'s, for a pool of `slots` tokens and a context above any request
        self.max_total_num_tokens = slots
        self.max_prefill_tokens = get_schedule().max_prefill_tokens
        self.max_running_requests = rows
        self.max_queued_requests = get_schedule().max_queued_requests
        self.max_req_len = min(config.context_len - 1, slots - 1)
        self.max_req_input_len = self.max_req_len - 5
        self.random_seed = get_device().random_seed
        self.device = "cpu"
        self.forward_stream = runner.forward_stream
        self.min_free_slots_delayer = None
        if not get_parallel().pp_max_micro_batch_size:  # what enforces max_running_requests
            get_context().override(
                "scheduler.pp_max_micro_batch_size_default",
                pp_max_micro_batch_size=max(rows // get_parallel().pp_size, 1),
            )
        parallel = get_parallel()
        self.tp_group = parallel.tp_group
        self.tp_cpu_group = self.tp_group.cpu_group
        self.attn_tp_group = parallel.attn_tp_group
        self.attn_tp_cpu_group = self.attn_tp_group.cpu_group
        self.attn_cp_group = parallel.attn_cp_group
        self.attn_cp_cpu_group = self.attn_cp_group.cpu_group
        self.pp_group = parallel.pp_group
        self.world_group = parallel.world_group
        if hasattr(dp_attention, "get_dp_tp_group"):
            self.dp_tp_group = dp_attention.get_dp_tp_group()
        else:  # 0.5.21 and before: set inline in init_model_worker
            self.dp_tp_group = self.attn_tp_group if self.enable_dp_attention else self.tp_group
        self.dp_tp_cpu_group = self.dp_tp_group.cpu_group
        self.pad_input_ids_func = None
        self.startup_available_gpu_memory_gb = 0.0
        # as SGLang's init_model_worker ends: every library seeded with the server's seed
        # (the random policy's shuffles read Python's)
        set_random_seed(self.random_seed)

    return init_model_worker
