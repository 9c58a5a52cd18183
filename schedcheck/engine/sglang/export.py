"""SGLang's part of an exported test (engine/export.py): its real `Scheduler` built on a CPU
as build.py builds it, with the same four replacements written out in the test (the model
worker: the real pools and the simulated model; in-memory sockets for its zmq ones; the
parallel runtime set up once per process; no watchdog), requests sent through its own
wire encoding and request receiver, and each step one pass of the body of its event loop,
the normal one or the overlap one (`event_loop_normal`, `event_loop_overlap`, 0.5.23),
as drive.py takes it. Its pool is read as pools.py reads it for E3: the allocator's free
pages, the radix tree's nodes (their `lock_ref`, evictable at 0) and each request's row of
`req_to_token`; its outputs are what it sent its detokenizer.

On a lean CPU install (no triton, torchvision, IPython, sgl_kernel: .ci/install-sglang) the
test stands those in as standins.py does, SGLang's own triton stand-in among them; where
they are installed it imports them. Nothing of SGLang is imported here: the release's
shape is read off its files, and a release the test is not written for is refused.
"""

from __future__ import annotations

import importlib.metadata
import pprint
from pathlib import Path

from schedcheck.engine.adapter import EngineSetup
from schedcheck.engine.export import Rendered, names_literal
from schedcheck.engine.sglang.build import TINY_LLAMA, keyed, server_args
from schedcheck.engine.sglang.drive import LOOPS
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.workload import EOS

__all__ = ["render"]

IMPORTS = '''import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import platform
import signal
import sys
import tempfile
import types
from array import array
from collections import deque
from pathlib import Path

import torch
import zmq

os.environ["SGLANG_USE_CPU_ENGINE"] = "1"  # its CPU paths (is_cpu())
os.environ["SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND"] = "python"  # a tree read from Python
os.environ["SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_BUSY"] = "1"  # its loop's own pool check


def stand_ins():
    """SGLang's modules import triton at the top, and a few torchvision, IPython and
    sgl_kernel; none of them runs on the scheduling path. Where they are not installed (a
    CPU install), triton is SGLang's own stand-in (sglang/_platform_stubs.py, written for
    macOS: installed with its platform check answered, its changes to torch undone) and
    the others modules whose every call raises. transformers is imported first, so that it
    sees them missing."""
    if importlib.util.find_spec("triton") is not None:
        return
    import transformers  # noqa: F401

    class Missing(types.ModuleType):
        def __init__(self, name):
            super().__init__(name)
            self.__path__ = []
            self.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)

        def __getattr__(self, attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            child = sys.modules.get(f"{self.__name__}.{attr}") or Missing(f"{self.__name__}.{attr}")
            object.__setattr__(self, attr, child)
            return child

        def __call__(self, *args, **kwargs):
            raise RuntimeError(f"{self.__name__} is not installed, and SGLang called it")

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            if isinstance(sys.modules.get(name.split(".")[0]), Missing):
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec):
            return Missing(spec.name)

        def exec_module(self, module):
            pass

    for name in ("torchvision", "IPython", "sgl_kernel"):
        sys.modules[name] = Missing(name)
    sys.meta_path.insert(0, Finder())
    folder = Path(importlib.util.find_spec("sglang").origin).parent
    spec = importlib.util.spec_from_file_location(
        "_sglang_platform_stubs", folder / "_platform_stubs.py"
    )
    stubs = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = stubs
    spec.loader.exec_module(stubs)
    saved = (sys.platform, platform.machine, torch.backends.mps.is_available)
    mps, to, copy = set(vars(torch.mps)), torch.Tensor.to, torch.Tensor.copy_
    try:
        sys.platform, platform.machine = "darwin", lambda: "arm64"
        torch.backends.mps.is_available = lambda: True
        stubs.install_platform_stubs()
    finally:
        sys.platform, platform.machine, torch.backends.mps.is_available = saved
        for attr in set(vars(torch.mps)) - mps:
            delattr(torch.mps, attr)
        torch.Tensor.to, torch.Tensor.copy_ = to, copy


stand_ins()

from sglang.srt import runtime_context  # noqa: E402
from sglang.srt.distributed import bootstrap  # noqa: E402
from sglang.srt.environ import envs  # noqa: E402
from sglang.srt.managers import io_struct  # noqa: E402
from sglang.srt.managers import scheduler as scheduler_module  # noqa: E402
from sglang.srt.managers.scheduler import Scheduler  # noqa: E402
from sglang.srt.managers.scheduler_components.ipc_channels import (  # noqa: E402
    SchedulerIpcChannels,
)
from sglang.srt.managers.scheduler_components.output_sender import SenderWrapper  # noqa: E402
from sglang.srt.managers.utils import GenerationBatchResult  # noqa: E402
from sglang.srt.sampling.sampling_params import SamplingParams  # noqa: E402
from sglang.srt.server_args import PortArgs, ServerArgs  # noqa: E402
from sglang.srt.utils.watchdog import _WatchdogNoop  # noqa: E402'''

HELPERS = '''
class Socket:
    """One of the scheduler's zmq sockets, in memory: send() queues; recv() pops, or raises
    zmq.Again as a non-blocking recv does."""

    def __init__(self):
        self.items = deque()

    def send(self, data, flags=0, copy=True, track=False):
        self.items.append(bytes(data))

    def recv(self, flags=0, copy=True, track=False):
        if not self.items:
            raise zmq.Again()
        return self.items.popleft()

    def send_pyobj(self, obj, flags=0, protocol=None):
        self.items.append(obj)

    def recv_pyobj(self, flags=0):
        return self.recv()

    def poll(self, timeout=None, flags=0):
        return 1 if self.items else 0

    def close(self, linger=None):
        pass


SOCKETS = {}  # the live scheduler's: its inbox, its RPC inbox, to the detokenizer, to the tokenizer


def in_memory_channels(cls, **kwargs):
    """SchedulerIpcChannels.create with in-memory sockets instead of zmq's."""
    for name in ("inbox", "rpc", "detokenizer", "tokenizer"):
        SOCKETS[name] = Socket()
    return cls(
        recv_from_tokenizer=SOCKETS["inbox"],
        recv_from_rpc=SOCKETS["rpc"],
        send_to_tokenizer=SenderWrapper(SOCKETS["tokenizer"]),
        send_to_detokenizer=SenderWrapper(SOCKETS["detokenizer"]),
        send_metrics_from_scheduler=None,
    )


def once(setup):
    """The parallel runtime's setup, run once per process (it refuses a second run): later
    schedulers keep the first one's process groups."""
    done = []

    def setup_once(**kwargs):
        if not done:
            setup(**kwargs)
            done.append(True)

    setup_once.once = True
    return setup_once


def compute(batch, flight):
    """The model: each request of the batch computes the positions SGLang's model runner
    computes (an extend prefix_lens[i] .. seq_lens[i] - 1, a decode seq_lens[i] - 1) on the
    input ids it is given, and samples NEXT's token for its tokens before them and those
    inputs. `flight`: the tokens sampled in batches whose results are not processed yet
    (the overlap loop), oldest first, by request id."""
    extend = batch.forward_mode.is_extend()
    ids, ends = batch.input_ids.tolist(), batch.seq_lens.tolist()
    sampled, kept, at = [], {}, 0
    for i, req in enumerate(batch.reqs):
        start = int(batch.prefix_lens[i]) if extend else ends[i] - 1
        known = [*req.origin_input_ids, *req.output_ids]
        known += [tokens[req.rid] for tokens in flight if req.rid in tokens]
        inputs, at = ids[at : at + ends[i] - start], at + ends[i] - start
        token = NEXT[(*known[:start], *inputs)]
        sampled.append(token)
        if ends[i] == len(known):  # the last chunk, or a decode: SGLang appends its token
            kept[req.rid] = token
    flight.append(kept)
    return sampled


class Worker:
    """The TP worker, as the scheduler reads it: the real pools (its model runner's), and
    the simulated model as its forward_batch_generation."""

    is_hybrid_swa = False
    sliding_window_size = None
    weight_load_time = 0.0
    graph_time_usage = {}
    graph_memory_usage = {}
    preloaded_weights_bytes = 0
    model_runner_list = None

    def __init__(self, model_runner, model_config):
        self.model_runner, self.model_config = model_runner, model_config
        self.flight = deque()

    def get_memory_pool(self):
        return self.model_runner.req_to_token_pool, self.model_runner.token_to_kv_pool_allocator

    def get_pad_input_ids_func(self):
        return None

    def get_tokens_per_layer_info(self):
        return self.model_runner.max_total_num_tokens, None

    def forward_batch_generation(self, batch, pp_proxy_tensors=None, **kwargs):
        tokens = torch.tensor(compute(batch, self.flight), dtype=torch.int64)
        return GenerationBatchResult(
            logits_output=None, next_token_ids=tokens, can_run_cuda_graph=False
        )


def init_model_worker(self):
    """Scheduler.init_model_worker without a model: the real pools, sized as SGLang's KV
    cache configurator sizes them for these arguments, in a worker whose model is
    `compute`; the scheduler's fields set from the worker as it sets them."""
    from sglang.srt.layers import dp_attention
    from sglang.srt.mem_cache.allocation_sizing import get_req_to_token_extra_context_len
    from sglang.srt.mem_cache.allocator import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool
    from sglang.srt.model_executor.model_runner_components.ngram_embedding_manager import (
        NgramEmbeddingManager,
    )
    from sglang.srt.runtime_context import get_context, get_device, get_parallel, get_schedule

    config, page, schedule = self.model_config, self.page_size, get_schedule()
    slots = schedule.max_total_tokens
    rows = min(max(1, schedule.max_running_requests), slots // 2)  # resolve_max_num_reqs
    row_pool = ReqToTokenPool(
        size=rows,
        max_context_len=config.context_len + get_req_to_token_extra_context_len(),
        device="cpu",
        enable_memory_saver=False,
    )
    kv = MHATokenToKVPool(
        slots, page_size=page, dtype=torch.float32, head_num=1, head_dim=config.head_dim,
        layer_num=1, device="cpu", enable_memory_saver=False, enable_alt_stream=False,
    )
    if page == 1:
        allocator = TokenToKVPoolAllocator(
            slots, dtype=torch.float32, device="cpu", kvcache=kv, need_sort=False
        )
    else:
        allocator = PagedTokenToKVPoolAllocator(
            slots, page_size=page, dtype=torch.float32, device="cpu", kvcache=kv, need_sort=False
        )
    runner = types.SimpleNamespace(
        model_config=config, device="cpu", req_to_token_pool=row_pool, token_to_kv_pool=kv,
        token_to_kv_pool_allocator=allocator, max_total_num_tokens=slots,
        logical_max_total_num_tokens=slots, effective_logical_max_total_num_tokens=slots,
        max_running_requests=rows, forward_stream=torch.cpu.Stream(),
        attn_backend=types.SimpleNamespace(), prefill_aware_swa=False, lora_manager=None,
        canary_manager=None, hisparse_coordinator=None, mtp_draft_device_pools=(),
        mtp_draft_mamba_pools=(), is_hybrid_swa=False, sliding_window_size=None,
        memory_pool_config=None, weight_load_mem_usage=0.0,
        ngram_embedding_manager=NgramEmbeddingManager.from_model(
            model=None, model_config=config, req_to_token_pool=row_pool,
            max_running_requests=rows, device="cpu",
        ),
    )
    self.tp_worker = self.model_worker = Worker(runner, config)
    self.maybe_init_draft_worker()  # SGLang's own: no speculative decoding, no draft
    self.kv_cache_allocation_time = 0.0
    self.schedule_stream = torch.cpu.Stream()
    # get_worker_info()'s, for a pool of `slots` tokens and a context above any request
    self.max_total_num_tokens = slots
    self.max_prefill_tokens = schedule.max_prefill_tokens
    self.max_running_requests = rows
    self.max_queued_requests = schedule.max_queued_requests
    self.max_req_len = min(config.context_len - 1, slots - 1)
    self.max_req_input_len = self.max_req_len - 5
    self.random_seed = get_device().random_seed
    self.device = "cpu"
    self.forward_stream = runner.forward_stream
    self.min_free_slots_delayer = None
    parallel = get_parallel()
    if not parallel.pp_max_micro_batch_size:  # what enforces max_running_requests
        get_context().override(
            "scheduler.pp_max_micro_batch_size_default",
            pp_max_micro_batch_size=max(rows // parallel.pp_size, 1),
        )
    self.tp_group, self.attn_tp_group = parallel.tp_group, parallel.attn_tp_group
    self.attn_cp_group, self.pp_group = parallel.attn_cp_group, parallel.pp_group
    self.world_group, self.dp_tp_group = parallel.world_group, dp_attention.get_dp_tp_group()
    for group in ("tp", "attn_tp", "attn_cp", "dp_tp"):
        setattr(self, f"{group}_cpu_group", getattr(self, f"{group}_group").cpu_group)
    self.pad_input_ids_func = None
    self.startup_available_gpu_memory_gb = 0.0


def replace():
    """The four replacements, each at its narrowest: what a CPU and no model stand in for
    (made as a scheduler is built: another test of this kind makes its own)."""
    Scheduler.init_model_worker = init_model_worker
    SchedulerIpcChannels.create = classmethod(in_memory_channels)
    if not hasattr(bootstrap.init_parallel_runtime, "once"):
        bootstrap.init_parallel_runtime = once(bootstrap.init_parallel_runtime)
    scheduler_module.create_scheduler_watchdog = lambda *args, **kwargs: _WatchdogNoop()


class Engine:
    """SGLang's Scheduler and the sockets around it: requests go in as its tokenizer
    manager sends them, outputs come out as its detokenizer reads them; a step is one pass
    of its event loop's body (Scheduler.event_loop_normal, or event_loop_overlap, which
    launches batch N+1 before it processes batch N's result)."""

    def __init__(self, scheduler):
        self.scheduler, self.sockets = scheduler, dict(SOCKETS)
        self.added, self.finished, self.aborted, self.said = [], set(), set(), {}
        self.refused = set()  # ended by SGLang unasked (an AbortReq the test did not send)
        self.reqs = {}  # SGLang's Req of each request a batch ran, by name

    def send(self, message):
        io_struct.sock_send(self.sockets["inbox"], message)

    def step(self):
        s = self.scheduler
        s.ingest_requests()
        plan = s.get_next_batch_to_run(running_batch=s.running_batch, last_batch=s.last_batch)
        s.running_batch = plan.running_batch
        batch = plan.batch_to_run
        s.cur_batch_for_debug = batch
        for req in batch.reqs if batch else ():
            self.reqs.setdefault(req.rid[:-1], req)
        if not OVERLAP:
            if batch:
                result = s.run_batch(batch)
                self.process(batch, result)
            else:
                s._sched_idled = True
                s.on_idle()
        else:
            disable_overlap_for_batch = s.is_disable_overlap_for_batch(
                batch, last_batch=s.last_batch
            )
            if disable_overlap_for_batch:
                self.process(*s.result_queue.popleft())
            if batch:
                batch_result = s.run_batch(batch)
                s._apply_war_barrier()
                s.result_queue.append((batch.copy(), batch_result))
            else:
                batch_result = None
                s._sched_idled = True
            if s.last_batch:
                if not disable_overlap_for_batch:
                    self.process(*s.result_queue.popleft())
            elif batch is None:
                s.on_idle()
            if s.is_generation:
                s.launch_batch_sample_if_needed(batch_result, batch)
        s.last_batch = batch
        if envs.SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_BUSY.get():
            s.invariant_checker.self_check_during_busy()
        self.collect()

    def process(self, batch, result):
        self.scheduler.process_batch_result(batch, result)
        if self.scheduler.tp_worker.flight:
            self.scheduler.tp_worker.flight.popleft()  # its tokens are appended now

    def collect(self):
        """What the scheduler sent its detokenizer and tokenizer: each request's new output
        tokens, and whether it is finished (a finish reason; an abort of one not running)."""
        for socket in (self.sockets["detokenizer"], self.sockets["tokenizer"]):
            while socket.items:
                message = io_struct.sock_recv(socket, zmq.NOBLOCK)
                rids = getattr(message, "rids", None)
                if rids is None:  # AbortReq: a request ended outside the output stream
                    name = str(getattr(message, "rid", ""))[:-1]
                    self.finished.add(name)
                    if name not in self.aborted:  # SGLang's own: _abort_on_queued_limit
                        self.refused.add(name)
                    continue
                for i, rid in enumerate(rids):
                    name = str(rid)[:-1]
                    tokens = message.output_ids[i] if message.output_ids is not None else ()
                    self.said.setdefault(name, []).extend(int(t) for t in tokens)
                    if message.finished_reasons[i] is not None:
                        self.finished.add(name)
'''

BUILD = """replace()
folder = Path(tempfile.mkdtemp())
(folder / "config.json").write_text(json.dumps(MODEL))
args = ServerArgs(
    model_path=str(folder), device="cpu", page_size=BLOCK_SIZE,
    chunked_prefill_size=MAX_NUM_BATCHED_TOKENS, max_prefill_tokens=MAX_NUM_BATCHED_TOKENS,
    max_running_requests=MAX_NUM_SEQS, max_total_tokens=(NUM_BLOCKS - 1) * BLOCK_SIZE,
    disable_overlap_schedule=not OVERLAP, skip_tokenizer_init=True, load_format="dummy",
    sleep_on_idle=False, disable_cuda_graph=True, schedule_conservativeness=CONSERVATIVENESS,
    **SERVER,
)  # page 0 is its padding page: NUM_BLOCKS - 1 pages to hand out
rank = runtime_context.spawn_world_rank(args, tp_rank=0, pp_rank=0)
ranks = runtime_context.SpawnRanks(world_rank=rank, dp_rank=None, gpu_id=0)
runtime_context.publish(args, role="scheduler", ranks=ranks)  # as run_scheduler_process does
scheduler = Scheduler(args, PortArgs.init_new(args))
if OVERLAP:  # what event_loop_overlap sets before its loop
    scheduler.enable_skip_finishing_decode = True
    scheduler.result_queue = deque()
scheduler._war_barrier_enabled = False  # run_event_loop's: for CUDA streams only
return Engine(scheduler)"""

ADD = """params = SamplingParams(
    max_new_tokens=max_tokens, ignore_eos=ignore_eos, stop_token_ids=list(stop) or None,
    temperature=0.0,
)
params.normalize(None)
params.verify(MODEL["vocab_size"])
message = io_struct.TokenizedGenerateReqInput(
    rid=f"{name}.",  # abort_request aborts every id starting with the one aborted: r1 of r10
    input_text=None, input_ids=array("q", prompt), input_embeds=None, token_type_ids=None,
    mm_inputs=None, sampling_params=params, return_logprob=False, logprob_start_len=-1,
    top_logprobs_num=0, token_ids_logprob=None, stream=name in STREAMED,
    priority=priority if SERVER.get("enable_priority_scheduling") else None,
    **NAMESPACES.get(name, {}),
)  # as its tokenizer manager sends it (_create_tokenized_object)
engine.send(message)
engine.added.append(name)
return message"""

ABORT = """engine.send(io_struct.AbortReq(rid=f"{name}."))  # as its tokenizer manager sends one
engine.aborted.add(name)"""

POOL = """s = engine.scheduler
page, allocator = s.page_size, s.token_to_kv_pool_allocator
count = allocator.size // page + 1  # page 0 is its padding page, never handed out
refs, cached = [0] * count, []
stack = [s.tree_cache.tree_core.root_node]  # the radix tree: a node's lock_ref is its pages'
while stack:
    for child in stack.pop().children.values():
        stack.append(child)
        data = child.component_data[0]  # its full-attention KV
        if data.value is not None:
            slots = data.value.tolist()
            for b in (slots[j] // page for j in range(0, len(slots), page)):
                if 0 < b < count:
                    refs[b] += data.lock_ref
                    if not data.lock_ref:
                        cached.append(b)  # evictable
tables = {}
for name, req in engine.reqs.items():  # each request's row: the tree's part, then its own
    if req.kv.req_pool_idx is None:
        tables[name] = []
        continue
    held = s.req_to_token_pool.req_to_token[req.kv.req_pool_idx, : req.kv.kv_allocated_len]
    held = held.tolist()
    tables[name] = list(dict.fromkeys(x // page for x in held))
    for b in dict.fromkeys(x // page for x in held[req.kv.cache_protected_len :]):
        if 0 <= b < count:
            refs[b] += 1
return {
    "blocks": refs,
    "free": allocator.get_all_free_pages().tolist(),
    "used": [b for b in range(1, count) if refs[b] > 0],
    "cached": sorted(cached),
    "reserved": [0],
    "tables": tables,
}"""

DONE = """s = engine.scheduler  # nothing sent, waiting, or left of the last batch
return (
    not engine.sockets["inbox"].items and not s.waiting_queue and s.last_batch is None
    and s.is_fully_idle()
)"""

OUTPUTS = """return {name: engine.said.get(name, []) for name in engine.added}"""

# What the test needs of a release, read off its files: (file under sglang/, text, what)
NEEDS = (
    ("srt/managers/scheduler.py", "def ingest_requests", "Scheduler.ingest_requests"),
    ("srt/distributed/bootstrap.py", "def init_parallel_runtime", "init_parallel_runtime"),
    ("srt/runtime_context.py", "SpawnRanks", "runtime_context.SpawnRanks"),
    ("srt/layers/dp_attention.py", "def get_dp_tp_group", "dp_attention.get_dp_tp_group"),
    ("srt/mem_cache/allocator", "def get_all_free_pages", "the allocator's get_all_free_pages"),
)


def _has(path: Path, text: str) -> bool:
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return any(text in f.read_text(errors="replace") for f in files if f.is_file())


def _release(root: Path) -> str:
    """The release at `root` as pip names it ("sglang" where none is recorded beside it)."""
    try:
        dist = importlib.metadata.Distribution.at(next(root.glob("sglang-*.dist-info")))
        return f"sglang=={dist.version}"
    except (StopIteration, OSError):
        return "sglang"


def render(setup: EngineSetup, trace: EngineTrace) -> Rendered | str:
    """SGLang's calls for the exported test, or why none is written."""
    w = trace.workload
    loop = w.config.mode or setup.modes[0]
    if loop not in LOOPS:
        return f"SGLang has no {loop!r} event loop"
    root = Path(setup.root)
    lacks = [what for file, text, what in NEEDS if not _has(root / "sglang" / file, text)]
    if lacks:
        return (
            "the test is written for SGLang 0.5.23's scheduler (0.5.22's has its shape); "
            f"this release has no {', '.join(lacks)}"
        )
    if any(r.abort and r.abort_in_step for r in w.requests):
        return "an abort landing during a step (SGLang's driver sends aborts between steps)"
    if any(r.logprobs_from >= 0 for r in w.requests):
        return (
            "prompt logprobs (the test's simulated model returns no logits processor "
            "output, which SGLang reads for them)"
        )
    if w.drafts:
        return (
            "speculative decoding (the test would need schedcheck's simulated draft worker, "
            "sglang/spec.py, which it does not carry)"
        )
    if w.config.max_adapters:
        return "LoRA adapters (the test builds a server of none)"
    if any(r.routing_key for r in w.requests):
        return "routing keys (the test sends none)"
    if any(r.embeds for r in w.requests):
        return "prompts carrying embeddings (the test sends token ids alone)"
    if any(r.session for r in w.requests):
        return "a streaming session (the test sends each request once, as one turn)"
    release = _release(root)
    facts = [
        "",
        f"EOS = {EOS}",
        "# a tiny llama: a config.json, no weights",
        f"MODEL = {pprint.pformat(TINY_LLAMA, width=88, sort_dicts=False)}",
        f"OVERLAP = {loop == 'overlap'}  # its event loop: {loop}"
        + (" (the release's default)" if loop == LOOPS[0] else ""),
        f"CONSERVATIVENESS = {w.config.conservativeness!r}  # schedule_conservativeness",
        "# its server's scheduling arguments",
        f"SERVER = {pprint.pformat(server_args(w.config), width=88, sort_dicts=False)}",
        f"STREAMED = {names_literal(r.name for r in w.requests if r.stream)}  # clients streamed",
        f"NAMESPACES = { ({r.name: keyed(r.namespace) for r in w.requests if r.namespace})!r}"
        "  # cache namespaces (extra_key or cache_salt)",
    ]
    version = release.removeprefix("sglang==")
    return Rendered(
        engine=release,
        title=f"SGLang {version} ({loop} loop)" if "==" in release else "",
        imports=IMPORTS + "\n" + "\n".join(facts),
        helpers=HELPERS.strip(),
        build_body=BUILD,
        add_body=ADD,
        abort_body=ABORT,
        step_body="engine.step()",
        pool_body=POOL,
        done_body=DONE,
        unfinished_body="return [name for name in engine.added if name not in engine.finished]",
        outputs_body=OUTPUTS,
        sent_body="return engine.said",
        held_body="return {name: len(req.output_ids) for name, req in engine.reqs.items()}",
        refused_body="return set(engine.refused)",
        ran_body="return set(engine.reqs)",
        replaced=(
            "the model: Scheduler.init_model_worker builds the real pools (ReqToTokenPool, "
            "a one-layer MHATokenToKVPool, its token or paged allocator) in a worker whose "
            "forward_batch_generation reads each step's tokens from NEXT, for the positions "
            "SGLang's model runner computes (an extend prefix_lens[i] .. seq_lens[i] - 1, a "
            "decode seq_lens[i] - 1)",
            "its zmq sockets, by in-memory queues (requests still go in through its wire "
            "encoding and request receiver); the parallel runtime set up once per process; "
            "its watchdog, by a no-op",
            "where they are not installed, triton (by SGLang's own stand-in), torchvision, "
            "IPython and sgl_kernel (modules whose every call raises): none runs on the "
            "scheduling path",
        ),
    )
