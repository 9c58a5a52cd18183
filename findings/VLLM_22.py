"""vLLM 0.26.0 (async-v1): E6 (the engine raises nothing) at step 1.

Found by schedcheck (`schedcheck engine`), exported as a test that needs only the engine and
pytest: vllm==0.26.0. Run: python -m pytest THIS_FILE.

What schedcheck saw: E6 at step 1, schedule(): raised AssertionError (at line 975 of
scheduler.py, in _build_store_jobs: )

The requests arrive at the steps written below and run through the engine's own scheduler;
the model is simulated: each step's tokens are read from NEXT, the token schedcheck's model
gave each prefix (a correct engine computes only prefixes listed).
Replaced: the model, by a config.json of one tiny llama layer and no weights; the block
hash, by a sha256 of its input (the release's own moved between modules)
Replaced: the model runner: each step's tokens are read from NEXT for the positions vLLM's
runner computes (num_computed_tokens onwards, num_scheduled_tokens of them); in async mode a
token sampled stays in flight until its step's update (the v1 runner's own copy of each
request's tokens is not played: where a scheduler bug makes it differ from the scheduler's,
the test may not fail as schedcheck's run did)

Re-run in schedcheck: schedcheck engine --engine vllm --modes all --features=connector --connector=offloading --replay findings/VLLM_22.json
"""

# The run, as schedcheck saw it:
#   config: num_kvcache_blocks=2 kvcache_block_size=2 max_num_seqs=1 max_num_batched_tokens=1 eos=0 policy=fcfs mode=async-v1
#   requests:
#     r1 prompt [1] max_tokens 1 its offload jobs take 1 (load), 1 (store) step(s) (step 1)
#     r2 prompt [1] max_tokens 1 its offload jobs take 1 (load), 1 (store) step(s) (step 1)
#     r3 prompt [1, 1] max_tokens 1 aborted at step 1 its offload jobs take 1 (load), 1 (store) step(s) (step 1)
#     r4 prompt [1] max_tokens 1 its offload jobs take 1 (load), 1 (store) step(s) (step 1)
#   model: next token = crc32 of the sequence so far; eos (0) when it is < 2 mod 16, else 1..1
#   KV connector: offloading, the engine's own, to a tier of 1 block(s), empty at the start; its load and store jobs take the steps each request says (at least 1); a failed load: recompute

import dataclasses
import hashlib
import inspect
import json
import os
import signal
import tempfile
from collections import deque
from pathlib import Path

import pytest
import torch
from vllm.config import KVTransferConfig
from vllm.distributed.kv_transfer.kv_connector.v1.offloading.common import (
    OffloadingWorkerMetadata,
)
from vllm.config import CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, VllmConfig
from vllm.sampling_params import SamplingParams
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import (
    FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheTensor,
)
from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec
from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput
from vllm.v1.request import Request, RequestStatus
from vllm.v1.structured_output import StructuredOutputManager

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is a local config.json
os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "0"  # the protocol is set on the Scheduler (V2)

EOS = 0
# one tiny llama layer: a config.json, no weights
MODEL = {'architectures': ['LlamaForCausalLM'],
 'model_type': 'llama',
 'hidden_size': 64,
 'intermediate_size': 128,
 'num_attention_heads': 4,
 'num_key_value_heads': 4,
 'num_hidden_layers': 1,
 'vocab_size': 256,
 'max_position_embeddings': 65536,
 'torch_dtype': 'float32',
 'eos_token_id': 0}
ASYNC = True  # async scheduling (mode async-v1)
V2 = False  # the v2 model runner's protocol
EAGER_ABORTS = True  # _process_aborts_queue
LOOKS_AT_DEVICE = False  # step_with_batch_queue asks batch.done()
WORKER_DRAFTS = False  # the v2 runner keeps its drafts; -1s are sent
LOAD_FAILURE = 'recompute'  # kv_load_failure_policy
OFFLOAD_BLOCKS = 1  # the CPU tier's size, in blocks
# the steps each load job and each store job of a request takes
JOB_STEPS = {'r1': (1, 1), 'r2': (1, 1), 'r3': (1, 1), 'r4': (1, 1)}

BLOCK_SIZE = 2
NUM_BLOCKS = 2
MAX_NUM_SEQS = 1
MAX_NUM_BATCHED_TOKENS = 1
MAX_MODEL_LEN = 3
POLICY = 'fcfs'
NEXT = {(1,): 1, (1, 1): 0}
ARRIVALS = {
    1: [('r1', [1], 1, False), ('r2', [1], 1, False), ('r3', [1, 1], 1, False), ('r4', [1], 1, False)],
}
ABORTS = {1: ['r3']}
LANDING = set()  # aborts that land while their step runs
LAST = 1  # the last arrival: after it, a step with nothing to run ends the test
STEPS = 54  # every request finishes within these (a generous bound)
STEP_SECONDS = 10  # a step that takes longer hangs (schedcheck's E6)


class Core:
    """vLLM's engine core reduced to its scheduler's calls: EngineCore.step, or in async
    mode step_with_batch_queue with a queue of two (step N+1 is scheduled before step N's
    update). The model runner is simulated: a request scheduled to the end of its tokens
    (those it knows and those in flight) samples NEXT's token for them."""

    def __init__(self, scheduler):
        self.scheduler, self.requests = scheduler, {}
        # (output, {name: tokens sampled}, names dropped, {name: drafts rejected}), oldest
        # right
        self.queue = deque()
        self.held = {}  # WORKER_DRAFTS: the drafts the runner keeps for each request
        self.landing, self.again = [], []  # aborts landing during a step, then again after
        self.scheduled = {}  # the last schedule(): name -> [start, count, tokens, blocks]
        self.hasher = get_request_block_hasher(BLOCK_SIZE, block_hash)
        self.made = 0  # the Requests made: each one's arrival_time, in the order sent
        self.params = {}  # a session's name -> (max_tokens, ignore_eos, priority, stop)
        self.streamed = {}  # name -> every token its client was streamed, turn after turn
        self.worker, self.reports = None, {}  # a KV connector's worker; its output by step
        self.n = 0  # the step

    def arrival(self):
        self.made += 1
        return float(self.made - 1)

    def pending(self, name):
        """The steps not yet updated whose output for `name` lands: (tokens, rejected)."""
        return [(s[name], r[name]) for _, s, dropped, r in reversed(self.queue)
                if name in s and name not in dropped]

    def flight(self, name):
        """The tokens `name` has in flight: sampled in steps not yet updated."""
        return [t for tokens, _ in self.pending(name) for t in tokens]

    def finish(self, names):
        for name in names:
            self.scheduler.finish_requests(name, RequestStatus.FINISHED_ABORTED)

    def has_requests(self):
        return getattr(self.scheduler, "has_requests", self.scheduler.has_unfinished_requests)()

    def step(self, n, seen):
        self.n = n
        self.finish(self.again)
        self.again = []
        if not ASYNC or self.has_requests():
            out = self.scheduler.schedule()
            self.queue.appendleft(self.compute(out))
            if seen:
                seen("schedule()")
            total = out.total_num_scheduled_tokens
            if len(self.queue) < (2 if ASYNC else 1) and self.holds(total, n):
                self.again, self.landing = self.landing, []
                return
        self.update(self.queue.pop(), seen)

    def holds(self, total, n):
        """Whether the engine core, its queue not full, returns without an update."""
        if LOOKS_AT_DEVICE:  # a batch the device finished (EARLY) is updated at once
            return total > 0 and n not in EARLY
        return total > 0 or self.has_requests()

    def compute(self, out):
        self.stale()
        if self.worker is not None:  # a KV connector's worker, before the forward pass
            self.worker.begin(out, self.n)
        self.scheduled, sampled, rejected = {}, {}, {}
        if WORKER_DRAFTS:  # the v2 runner's rows: a request added (or re-added) zeroed
            for name in {*out.finished_req_ids, *(getattr(out, "preempted_req_ids", None) or ())}:
                self.held.pop(name, None)
            for new in out.scheduled_new_reqs:
                self.held[new.req_id] = [0] * SPEC
        for name, count in out.num_scheduled_tokens.items():
            tokens = [*self.requests[name].all_token_ids, *self.flight(name)]
            drafts = list(out.scheduled_spec_decode_tokens.get(name, ()))  # computed after
            if WORKER_DRAFTS and drafts:  # sent as -1s: the runner computes its own
                drafts = (self.held.get(name, []) + [-1] * len(drafts))[: len(drafts)]
            # schedule() advanced num_computed_tokens, counting the drafts in flight too
            start = self.requests[name].num_computed_tokens - count
            start -= sum(r for _, r in self.pending(name))  # those rejected: not computed
            blocks = list(self.scheduler.kv_cache_manager.get_block_ids(name)[0])
            size, written = len(tokens) + len(drafts), tokens + drafts
            self.scheduled[name] = [start, count, size, blocks, len(drafts), written]
            # the model attends to garbage KV a failed load left: it says garbage
            wrong = self.worker is not None and self.worker.computes(blocks, start, count)
            if wrong and start + count >= len(tokens):
                sampled[name] = [garbage(NEXT[tuple(tokens)])]
            elif drafts and start + count >= len(tokens) + len(drafts):
                sampled[name] = verify(tokens, drafts)
            elif start + count >= len(tokens):
                sampled[name] = [NEXT[tuple(tokens[: start + count])]]
            if name in sampled:
                rejected[name] = len(drafts) + 1 - len(sampled[name])
                if WORKER_DRAFTS:  # its proposer, after the step
                    proposed = DRAFTS.get(tuple(tokens + sampled[name]), [])
                    self.held[name] = list(proposed)[: self.asked(out)]
        if self.worker is not None:  # what it reports with the step's output
            self.reports[id(out)] = self.worker.output(self.n)
        return out, sampled, set(), rejected

    def asked(self, out):
        """The drafts its proposer makes after the step `out` scheduled: the count the
        scheduler asks for (0.33 on: by the batch size, SCHEDULE), else SPEC."""
        asked = getattr(out, "num_spec_tokens_to_schedule", None)
        return SPEC if asked is None else asked

    def update(self, batch, seen):
        out, sampled, _, _ = batch
        if self.landing:  # the aborts that landed during the step, before its update
            self.scheduler.finish_requests(self.landing, RequestStatus.FINISHED_ABORTED)
            self.again, self.landing = self.landing, []
        order = list(out.num_scheduled_tokens)
        said = self.reports.pop(id(out), None)  # its KV connector's worker's, if any
        made = self.scheduler.update_from_output(out, runner_output(order, sampled, said))
        for outputs in (made or {}).values():  # what each client is streamed
            for output in getattr(outputs, "outputs", ()):
                self.streamed.setdefault(output.request_id, []).extend(output.new_token_ids)
        self.stale()
        if seen:
            seen("update_from_output()")

    def stale(self):
        """The requests whose output in flight vLLM drops when it lands (0.31 on: a turn
        that stopped, a preemption that must not hand off freed blocks): none of theirs."""
        for name, r in self.requests.items():
            if getattr(r, "drop_stale_output", False) and getattr(r, "num_stale_output_tokens", 0):
                for _, _, dropped, _ in self.queue:
                    dropped.add(name)

    def state(self):
        progress = {}
        for name, r in self.requests.items():
            if not r.is_finished():
                status = "RUNNING" if r.status == RequestStatus.RUNNING else "WAITING"
                placeholders = getattr(r, "num_output_placeholders", 0)
                in_flight = sum(len(t) + rejected for t, rejected in self.pending(name))
                progress[name] = [r.num_computed_tokens, placeholders, in_flight,
                                  len(r.all_token_ids), status]
        running = [r.request_id for r in self.scheduler.running]
        pool = self.scheduler.kv_cache_manager.block_pool
        hashed = {  # the blocks its prefix cache holds: the prefix each one's hash names
            b.block_id: list(NAMED.get(bytes(b.block_hash)[:32], ()))
            for b in pool.blocks
            if b.block_hash is not None and b.block_id != pool.null_block.block_id
        }
        return {"scheduled": self.scheduled, "running": running, "progress": progress,
                "hashed": hashed}


NAMED = {}  # a block hash -> the prefix it names (its chain of blocks' tokens)


def block_hash(obj):
    """The block hash function (the release's own sha256 moved between modules); a
    block's hash, (parent hash, its tokens, extra keys), remembered with its prefix. A
    block's hash is kept with its KV cache group's id (4 bytes) after it."""
    digest = hashlib.sha256(repr(obj).encode()).digest()
    if isinstance(obj, tuple) and len(obj) == 3 and isinstance(obj[1], tuple):
        NAMED.setdefault(digest, NAMED.get(obj[0], ()) + obj[1])
    return digest


def runner_output(order, sampled, kv_connector_output=None):
    """The step's ModelRunnerOutput: the tokens each request in `sampled` got, none for a
    chunk short of its end; with a KV connector, its worker's output. (0.11: numpy arrays
    and no defaults; 0.34: no req_id_to_index.)"""
    fields = {f.name: f for f in dataclasses.fields(ModelRunnerOutput)}
    tokens = [list(sampled[name]) if name in sampled else [] for name in order]
    if "ndarray" in str(fields["sampled_token_ids"].type):
        import numpy

        tokens = [numpy.array(t, dtype=numpy.int64) for t in tokens]
    more = {"logprobs": None, "prompt_logprobs_dict": {}, "pooler_output": []}
    none = dataclasses.MISSING
    more = {
        k: v for k, v in more.items()
        if k in fields and fields[k].default is none and fields[k].default_factory is none
    }
    if "req_id_to_index" in fields:
        more["req_id_to_index"] = {name: i for i, name in enumerate(order)}
    if kv_connector_output is not None:
        more["kv_connector_output"] = kv_connector_output
    return ModelRunnerOutput(req_ids=list(order), sampled_token_ids=tokens, **more)

class Offload:
    """The OffloadingConnector's worker side, at the level of its TransferJobs."""

    def __init__(self):
        self.pending, self.ended = [], []  # (due step, job id, request, an async load)

    def begin(self, out, n):
        """The step's metadata: end the jobs due or flushed, start its own."""
        meta = out.kv_connector_metadata
        flush = set(meta.jobs_to_flush or ())
        self.ended = [j for j in self.pending if j[0] <= n or j[1] in flush]
        self.pending = [j for j in self.pending if not (j[0] <= n or j[1] in flush)]
        for kind, jobs in (("load", meta.load_jobs), ("store", meta.store_jobs)):
            for job_id, job in jobs.items():
                steps = JOB_STEPS[job.req_id][0 if kind == "load" else 1]
                sync = kind == "load" and getattr(job, "sync", False)
                entry = (n + max(steps, 1), job_id, job.req_id, kind == "load" and not sync)
                (self.ended if sync or job_id in flush else self.pending).append(entry)

    def computes(self, blocks, first, count):
        """Whether a step computing there reads garbage KV: never (no tier load fails)."""
        return False

    def output(self, n):
        """What the worker reports: the jobs done, the requests whose loads all are."""
        loading = {req for _, _, req, is_load in self.pending if is_load}
        loaded = {req for _, _, req, is_load in self.ended if is_load and req not in loading}
        done = {job_id: 1 for _, job_id, _, _ in self.ended}
        meta = OffloadingWorkerMetadata(completed_jobs=done) if done else None
        return KVConnectorOutput(finished_recving=loaded or None, kv_connector_worker_meta=meta)


def build():
    folder = Path(tempfile.mkdtemp())
    (folder / "config.json").write_text(json.dumps(MODEL))
    model_config = ModelConfig(
        model=str(folder), tokenizer=str(folder), skip_tokenizer_init=True,
        max_model_len=MAX_MODEL_LEN, dtype="float32",
    )
    scheduler_config = SchedulerConfig(
        max_num_seqs=MAX_NUM_SEQS, max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
        max_model_len=MAX_MODEL_LEN, is_encoder_decoder=False, enable_chunked_prefill=True,
        async_scheduling=False, policy=POLICY,
    )
    page = FullAttentionSpec(
        block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype=torch.float32
    ).page_size_bytes
    align = getattr(CPUOffloadingSpec, "BLOCK_SIZE_ALIGNMENT", 1)  # (before 0.25: unpadded)
    failure = {}
    if "kv_load_failure_policy" in {f.name for f in dataclasses.fields(KVTransferConfig)}:
        failure["kv_load_failure_policy"] = LOAD_FAILURE
    transfer = KVTransferConfig(
        kv_connector="OffloadingConnector", kv_role="kv_both",
        kv_connector_extra_config={
            "cpu_bytes_to_use": OFFLOAD_BLOCKS * -(-page // align) * align, "block_size": BLOCK_SIZE,
        },
        **failure,
    )
    vllm_config = VllmConfig(
        model_config=model_config,
        cache_config=CacheConfig(block_size=BLOCK_SIZE, enable_prefix_caching=True),
        scheduler_config=scheduler_config,
        device_config=DeviceConfig(device="cpu"),
        kv_transfer_config=transfer,
    )
    vllm_config.cache_config.num_gpu_blocks = NUM_BLOCKS
    vllm_config.scheduler_config.async_scheduling = ASYNC  # after the CPU platform's hook
    spec = FullAttentionSpec(
        block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype=torch.float32
    )
    groups = [KVCacheGroupSpec(["layer.0"], spec)]
    # the tier's chunks sized by the KV tensors where one is a layer set (0.2x)
    if "shared_by" in {f.name for f in dataclasses.fields(KVCacheTensor)}:
        tensors = [KVCacheTensor(size=spec.page_size_bytes * NUM_BLOCKS, shared_by=["layer.0"])]
    else:
        tensors = []
    kv_cache_config = KVCacheConfig(
        num_blocks=NUM_BLOCKS, kv_cache_tensors=tensors, kv_cache_groups=groups
    )
    init_none_hash(block_hash)
    more = {}
    if "block_size" in inspect.signature(Scheduler).parameters:  # not in 0.11.0
        more["block_size"] = BLOCK_SIZE
    scheduler = AsyncScheduler(
        vllm_config, kv_cache_config, StructuredOutputManager(vllm_config), log_stats=True, **more
    )
    if V2 and hasattr(scheduler, "use_v2_model_runner"):
        scheduler.use_v2_model_runner = True  # the v2 model runner's protocol
    core = Core(scheduler)
    core.worker = Offload()
    return core


def add(engine, name, prompt, max_tokens, ignore_eos, priority=0, stop=()):
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=ignore_eos,
                            stop_token_ids=list(stop), temperature=1.0)
    params.update_from_generation_config({}, EOS)
    eos = {"eos_token_id": EOS} if "eos_token_id" in inspect.signature(Request).parameters else {}
    request = Request(name, list(prompt), params, None, arrival_time=engine.arrival(),
                      priority=priority, block_hasher=engine.hasher, **eos)
    engine.requests[name] = request
    engine.scheduler.add_request(request)
    return request


def abort(engine, requests, name, during):
    if during and EAGER_ABORTS:  # its engine core takes it just before the step's update
        engine.landing.append(name)
    else:
        engine.finish([name])


def step(engine, requests, n, seen):
    engine.step(n, seen)


def done(engine, requests):
    return not engine.has_requests() and not engine.queue


class Hung(Exception):
    """A call into the engine that did not return."""


def hung(signum, frame):
    raise Hung(f"a step did not return within {STEP_SECONDS} s")


@pytest.mark.cpu_test
def test_the_engine_raises_nothing():
    """The engine raises nothing (schedcheck's E6)."""
    engine, requests = build(), {}
    for n in range(1, STEPS + 1):
        for request in ARRIVALS.get(n, []):
            requests[request[0]] = add(engine, *request)
        for name in ABORTS.get(n, []):
            if name in requests:
                abort(engine, requests, name, name in LANDING)
        if done(engine, requests):
            if n >= LAST:
                break
            continue  # nothing to run until the next arrival
        signal.signal(signal.SIGALRM, hung)
        signal.alarm(STEP_SECONDS)
        try:
            step(engine, requests, n, None)  # E6: it raises nothing
        finally:
            signal.alarm(0)
