"""vLLM's part of an exported test (engine/export.py): its Scheduler or AsyncScheduler built
as its own CPU tests build one (`tests/v1/core/utils.py`'s `create_scheduler`: a
VllmConfig, a KVCacheConfig of one full-attention group, the StructuredOutputManager) and
driven as its engine core drives it (`EngineCore.step`, or `step_with_batch_queue` with a
queue of two in async mode), written from the trace's workload and the release's facts
(modes.py) alone: nothing of vLLM is imported here.

The test adapts to the release it runs on where releases differ in what a test must pass
(read off their signatures at run time, as build.py does), so that one exported test runs
on the release that has the bug, on the one that fixed it and on CI's: 0.11's Request
takes the model's eos and its ModelRunnerOutput numpy arrays; up to 0.33 the output maps
requests to rows; `reset_prefix_cache(reset_running_requests=True)` from 0.14.
"""

from __future__ import annotations

import importlib.metadata
import pprint
from pathlib import Path

from schedcheck.engine.adapter import EngineSetup
from schedcheck.engine.export import Rendered
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.vllm.build import DRAFT_FOLDERS, METHODS, MODEL
from schedcheck.engine.vllm.modes import Mode
from schedcheck.engine.workload import DRAFTERS, EOS

__all__ = ["render"]

IMPORTS = """import dataclasses
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
from vllm.config import CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, VllmConfig
from vllm.sampling_params import SamplingParams
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
{imported}
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.request import Request, RequestStatus
from vllm.v1.structured_output import StructuredOutputManager

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is a local config.json
os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "0"  # the protocol is set on the Scheduler (V2)"""

CORE = '''
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
        {propose}if seen:
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
'''

# vLLM's own OffloadingConnector with a CPU tier: its scheduler side is vLLM's; its worker,
# which needs a GPU, is played here at the level of jobs, as the run played it: a job ends
# as a step starts (a synchronous load, or one the step's metadata flushes, at once; any
# other its request's JOB_STEPS after it started), reported with that step's output
OFFLOAD_WORKER = '''

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
'''

# a hybrid model (issue 51): its KV cache groups laid out by vLLM's own planner from
# its layers' specs, as its engine core lays them out (vllm/hybrid.py)
HYBRID_PLAN = '''

def hybrid_kv_cache_config(vllm_config, full):
    """The model's KV cache groups as vLLM's planner lays them out: full attention's layer
    and a layer of each kind LAYERS names ("window:W": SlidingWindowSpec; "chunk:C":
    ChunkedLocalAttentionSpec; "mamba": MambaSpec in the "align" mode prefix caching runs,
    as a hybrid Mamba model's config hook sets it), one page each, over NUM_BLOCKS blocks,
    the hybrid KV cache manager on (as on a GPU, and on vLLM's CPU platform)."""
    from vllm.v1.core import kv_cache_utils
    from vllm.v1.kv_cache_interface import ChunkedLocalAttentionSpec, MambaSpec, SlidingWindowSpec

    specs = {"layer.0": full}
    cache = vllm_config.cache_config
    for i, layer in enumerate(LAYERS, start=1):
        kind, _, size = layer.partition(":")
        shape = dict(block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype=torch.float32)
        if kind == "window":
            specs[f"layer.{i}"] = SlidingWindowSpec(**shape, sliding_window=int(size))
        elif kind == "chunk":
            specs[f"layer.{i}"] = ChunkedLocalAttentionSpec(**shape, attention_chunk_size=int(size))
        else:  # a state of one number, its page padded to attention's
            specs[f"layer.{i}"] = MambaSpec(
                block_size=BLOCK_SIZE, shapes=((1,),), dtypes=(torch.float32,),
                page_size_padded=full.page_size_bytes, mamba_cache_mode="align",
            )
            cache.mamba_cache_mode, cache.mamba_block_size = "align", BLOCK_SIZE
    vllm_config.scheduler_config.disable_hybrid_kv_cache_manager = False
    if hasattr(cache, "get_resolved_kv_cache_layout") and cache.kv_cache_layout is None:
        cache.kv_cache_layout = "LBNHC"  # (0.29 on) the engine core's, for default backends
    memory = [NUM_BLOCKS * full.page_size_bytes]
    try:
        from vllm.v1.core import kv_cache_planning as planning  # 0.34: grouping a step of its own
    except ImportError:
        configs = kv_cache_utils.get_kv_cache_configs(vllm_config, [specs], memory)
    else:
        groups = planning.get_global_kv_cache_groups(vllm_config, [specs])
        configs = planning.get_kv_cache_configs(vllm_config, [specs], memory, groups)
    return kv_cache_utils.generate_scheduler_kv_cache_config(configs)
'''

# schedcheck's own connector (connector "simulated"): written into the test and registered as
# users register theirs (kv_connector_module_path: the test's module), both of its sides as
# the run played them (engine/store.py, vllm/connector.py)
STORE_CONNECTOR = '''

def table(block_ids):
    """A request's block ids as a connector is handed them: a list, or one list per group."""
    ids = list(block_ids)
    return [int(b) for b in (ids[0] if ids and not isinstance(ids[0], int) else ids)]


def slot(ids, p):
    """The KV slot of position `p` through the block ids `ids` (None: past them)."""
    if p // BLOCK_SIZE >= len(ids):
        return None
    return ids[p // BLOCK_SIZE] * BLOCK_SIZE + p % BLOCK_SIZE


def common(a, b):
    """The length of the longest common prefix of two token lists."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def garbage(token):
    """A token the model would not have given: what it says after reading garbage KV."""
    return 1 if token != 1 else 2 if VOCAB > 1 else 0


class Started(KVConnectorMetadata):
    """A step's connector metadata: the loads and saves its scheduler side started, each
    (kind, request, block ids, first position moved, tokens)."""

    def __init__(self, transfers):
        self.transfers = transfers


class StoreConnector(KVConnectorBase_V1):
    """A KV connector over an external store holding the KV of every prefix of STORED's
    token lists and of what its saves put there. A lookup's hit is the longest prefix held
    past the tokens computed locally: all of the prompt for an asynchronous load, all but
    its last token for a synchronous one, none where it spares no computation; a request's
    first lookups (TRANSFER_STEPS' third) are answered "not yet". A finished request whose
    TRANSFER_STEPS save is saved: its blocks are kept until the worker reports it done. Its
    worker side is the test's (Transfers)."""

    def __init__(self, vllm_config, role, *rest, **named):
        super().__init__(vllm_config, role, *rest, **named)
        self.held = [tuple(p) for p in STORED]
        self.waits = {name: steps[2] for name, steps in TRANSFER_STEPS.items()}
        self.local, self.loading, self.started, self.saving = {}, set(), [], {}

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        name, prompt = request.request_id, list(request.prompt_token_ids)
        if self.waits.get(name, 0) > 0:
            self.waits[name] -= 1
            return None, False
        asynchronous = TRANSFER_STEPS[name][0] > 0
        longest = max((common(p, prompt) for p in self.held), default=0)
        most = len(prompt) if asynchronous else len(prompt) - 1
        hit = 0
        if min(longest, len(prompt) - 1) > num_computed_tokens:
            hit = max(0, min(longest, most) - num_computed_tokens)
        self.local[name] = num_computed_tokens
        return hit, asynchronous and hit > 0

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        if num_external_tokens:
            name = request.request_id
            first = self.local.get(name, 0)
            tokens = list(request.all_token_ids[: first + num_external_tokens])
            self.started.append(("load", name, table(blocks.get_block_ids()), first, tokens))
            if TRANSFER_STEPS[name][0]:
                self.loading.add(name)

    def build_connector_meta(self, scheduler_output):
        started, self.started = self.started, []
        return Started(started)

    def request_finished(self, request, block_ids):
        name, computed, ids = request.request_id, request.num_computed_tokens, table(block_ids)
        if not TRANSFER_STEPS[name][1] or not computed or not ids or name in self.loading:
            return False, None  # nothing to save (a load in flight: its KV is not there)
        tokens = list(request.all_token_ids[:computed])
        self.started.append(("save", name, ids, 0, tokens))
        self.saving.setdefault(name, []).append(tokens)
        return True, None

    def update_connector_output(self, connector_output):
        self.loading -= set(connector_output.finished_recving or ())
        for name in connector_output.finished_sending or ():
            self.held += [tuple(t) for t in self.saving.get(name, ())]

    # its worker side is the test's (Transfers): vLLM's scheduler never calls these
    def start_load_kv(self, forward_context, **kwargs):
        raise NotImplementedError

    def wait_for_layer_load(self, layer_name):
        raise NotImplementedError

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs):
        raise NotImplementedError

    def wait_for_save(self):
        raise NotImplementedError


class Transfers:
    """StoreConnector's worker side. A synchronous load ends before its step computes; any
    other transfer TRANSFER_STEPS steps after its own (1: with that step's output). A load's
    blocks LOAD_FAILS lists (counted from its first) fail; the KV slots of a failed block,
    and KV computed reading them, hold garbage."""

    def __init__(self):
        self.pending, self.ended, self.garbage = [], [], set()

    def begin(self, out, n):
        for transfer in out.kv_connector_metadata.transfers:
            kind, name = transfer[0], transfer[1]
            steps = TRANSFER_STEPS[name][0 if kind == "load" else 1]
            if kind == "load" and not steps:
                self.end(transfer)
            else:
                self.pending.append((n + max(steps, 1) - 1, transfer))

    def computes(self, blocks, first, count):
        """A step computes positions first.. of a request through `blocks`: whether it
        reads garbage KV, whose KV it writes then is garbage too; else it is good now."""
        bad = any(slot(blocks, p) in self.garbage for p in range(first))
        slots = {slot(blocks, p) for p in range(first, first + count)} - {None}
        self.garbage = self.garbage | slots if bad else self.garbage - slots
        return bad

    def output(self, n):
        """End the transfers due by step `n`; report those ended since the last report."""
        for _, transfer in [t for t in self.pending if t[0] <= n]:
            self.end(transfer)
        self.pending = [t for t in self.pending if t[0] > n]
        ended, self.ended = self.ended, []
        loads = {t[1] for t, _ in ended if t[0] == "load" and TRANSFER_STEPS[t[1]][0]}
        saves = {t[1] for t, _ in ended if t[0] == "save"}
        return KVConnectorOutput(
            finished_sending=saves or None, finished_recving=loads or None,
            invalid_block_ids={b for _, failed in ended for b in failed},
        )

    def end(self, transfer):
        kind, name, ids, first, tokens = transfer
        failed = set()
        if kind == "load" and first < len(tokens):
            moved = ids[first // BLOCK_SIZE : (len(tokens) - 1) // BLOCK_SIZE + 1]
            failed = {b for i, b in enumerate(moved) if i in LOAD_FAILS.get(name, ())}
            for p in range(first, len(tokens)):  # what it loaded is good KV now
                if slot(ids, p) is not None:
                    bad = ids[p // BLOCK_SIZE] in failed
                    (self.garbage.add if bad else self.garbage.discard)(slot(ids, p))
        self.ended.append((transfer, failed))
'''

STORE_CONFIG = """failure = {}
if "kv_load_failure_policy" in {f.name for f in dataclasses.fields(KVTransferConfig)}:
    failure["kv_load_failure_policy"] = LOAD_FAILURE
transfer = KVTransferConfig(
    kv_connector="StoreConnector", kv_connector_module_path=__name__, kv_role="kv_both",
    **failure,
)
"""

OFFLOAD_CONFIG = """page = FullAttentionSpec(
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
"""

OFFLOAD_TENSORS = """# the tier's chunks sized by the KV tensors where one is a layer set (0.2x)
if "shared_by" in {f.name for f in dataclasses.fields(KVCacheTensor)}:
    tensors = [KVCacheTensor(size=spec.page_size_bytes * NUM_BLOCKS, shared_by=["layer.0"])]
else:
    tensors = []
"""

# The n-gram method: its proposer needs no draft model, so its config builds on a CPU; the
# drafts are the test's (DRAFTS), handed over as the engine core hands the worker's.
SPECULATIVE = """speculative = SpeculativeConfig(
    method="ngram", num_speculative_tokens=SPEC, prompt_lookup_max=SPEC, prompt_lookup_min=1,
    target_model_config=model_config, target_parallel_config=ParallelConfig(),{schedule}
)
"""

# A draft model or an EAGLE-3 head: the method the run used (build.METHODS), its config.json
# the target's tiny one in a folder named as the run's (0.34 picks a head's config by the
# name); the scheduler reserves its lookahead slots from the config, as a server's does.
SPECULATIVE_MODEL = """draft = folder / DRAFT_FOLDER
draft.mkdir()
(draft / "config.json").write_text(json.dumps(MODEL))
speculative = SpeculativeConfig(
    method=METHOD, model=str(draft), num_speculative_tokens=SPEC,
    target_model_config=model_config, target_parallel_config=ParallelConfig(),{schedule}
)
"""

# EngineCore.post_step (sync scheduling): the worker's drafts for the step's requests, from
# the tokens each holds after the update (none for a chunk short of its end)
PROPOSE = """asked = self.asked(out)
        drafts = [list(DRAFTS[tuple(self.requests[n].all_token_ids)])[:asked] if n in sampled
                  else [] for n in order]
        self.scheduler.update_draft_token_ids(DraftTokenIds(order, drafts))
        """

# The same with a v2 runner, which keeps its drafts: the scheduler is told only how many
# (-1s), for the step's requests or (EVERY_DRAFT) every request the runner holds drafts for
PROPOSE_HELD = """names = list(self.held) if EVERY_DRAFT else order
        if order:  # a step that ran the model
            drafts = DraftTokenIds(names, [[-1] * self.asked(out) for _ in names])
            self.scheduler.update_draft_token_ids(drafts)
        """

BUILD = """folder = Path(tempfile.mkdtemp())
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
{speculative}{offload_config}vllm_config = VllmConfig(
    model_config=model_config,
    cache_config=CacheConfig(block_size=BLOCK_SIZE, enable_prefix_caching=True),
    scheduler_config=scheduler_config,
    device_config=DeviceConfig(device="cpu"),{spec_arg}{transfer_arg}
)
vllm_config.cache_config.num_gpu_blocks = NUM_BLOCKS
vllm_config.scheduler_config.async_scheduling = ASYNC  # after the CPU platform's hook
spec = FullAttentionSpec(
    block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype=torch.float32
)
groups = [KVCacheGroupSpec(["layer.0"], spec)]
{offload_tensors}kv_cache_config = KVCacheConfig(
    num_blocks=NUM_BLOCKS, kv_cache_tensors={tensors}, kv_cache_groups=groups
)
init_none_hash(block_hash)
more = {}
if "block_size" in inspect.signature(Scheduler).parameters:  # not in 0.11.0
    more["block_size"] = BLOCK_SIZE
scheduler = {cls}(
    vllm_config, kv_cache_config, StructuredOutputManager(vllm_config), log_stats=True, **more
)
if V2 and hasattr(scheduler, "use_v2_model_runner"):
    scheduler.use_v2_model_runner = True  # the v2 model runner's protocol
return Core(scheduler)"""

ADD = """params = SamplingParams(max_tokens=max_tokens, ignore_eos=ignore_eos,
                        stop_token_ids=list(stop), temperature=1.0)
params.update_from_generation_config({}, EOS)
eos = {"eos_token_id": EOS} if "eos_token_id" in inspect.signature(Request).parameters else {}
request = Request(name, list(prompt), params, None, arrival_time=engine.arrival(),
                  priority=priority, block_hasher=engine.hasher, **eos)
engine.requests[name] = request
engine.scheduler.add_request(request)
return request"""

# a session (0.15 on) is resumable; what its client sends, a Request of the same id
ADD_SESSION = """params = SamplingParams(max_tokens=max_tokens, ignore_eos=ignore_eos,
                        stop_token_ids=list(stop), temperature=1.0)
params.update_from_generation_config({}, EOS)
engine.params[name] = (max_tokens, ignore_eos, priority, stop)
request = Request(name, list(prompt), params, None, arrival_time=engine.arrival(),
                  priority=priority, block_hasher=engine.hasher, resumable=name in SESSIONS)
engine.requests[name] = request
engine.scheduler.add_request(request)
return request"""

# AsyncLLM's _add_streaming_input_request: each chunk a resumable Request of the session's
# id, its prompt the chunk (applied at once to a paused session, queued behind a turn still
# running); the close one that is not resumable (its prompt never read)
SEND = """max_tokens, ignore_eos, priority, stop = engine.params[name]
params = SamplingParams(max_tokens=max_tokens, ignore_eos=ignore_eos,
                        stop_token_ids=list(stop), temperature=1.0)
params.update_from_generation_config({}, EOS)
request = Request(name, list(chunk or [0]), params, None, arrival_time=engine.arrival(),
                  priority=priority, block_hasher=engine.hasher, resumable=chunk is not None)
engine.scheduler.add_request(request)"""

ABORT = """if during and EAGER_ABORTS:  # its engine core takes it just before the step's update
    engine.landing.append(name)
else:
    engine.finish([name])"""

RESET = """running = {r.request_id for r in engine.scheduler.running}
reset = engine.scheduler.reset_prefix_cache
if "reset_running_requests" in inspect.signature(reset).parameters:
    reset(reset_running_requests=True)  # vLLM drops what they have in flight
    for _, _, dropped, _ in engine.queue:
        dropped.update(running)
else:  # before 0.14: cleared only where no request holds a block
    reset()"""

POOL = """manager = engine.scheduler.kv_cache_manager
blocks, null = manager.block_pool.blocks, manager.block_pool.null_block.block_id
return {
    "blocks": [b.ref_cnt for b in blocks],
    "free": [b.block_id for b in manager.block_pool.free_block_queue.get_all_free_blocks()],
    "used": sorted(b.block_id for b in blocks if b.ref_cnt > 0 and b.block_id != null),
    "reserved": [null],
    "tables": {n: list(manager.get_block_ids(n)[0]) for n in requests
               if n in engine.scheduler.requests},
}"""


def _imports(imported: str, drafts: bool, connector: str = "") -> str:
    """The test's imports: its scheduler class's, speculative decoding's where it drafts, a
    KV connector's where it runs one (vLLM's offloading connector, or its interface for the
    test's own)."""
    text = IMPORTS.replace("{imported}", imported)
    if connector:
        text = text.replace(
            "from vllm.v1.outputs import ModelRunnerOutput",
            "from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput",
        )
    if connector == "simulated":
        text = text.replace(
            "from vllm.config import CacheConfig,",
            "from vllm.config import KVTransferConfig\n"
            "from vllm.distributed.kv_transfer.kv_connector.v1.base import (\n"
            "    KVConnectorBase_V1,\n    KVConnectorMetadata,\n)\n"
            "from vllm.config import CacheConfig,",
        )
    if connector == "offloading":
        text = text.replace(
            "from vllm.config import CacheConfig,",
            "from vllm.config import KVTransferConfig\n"
            "from vllm.distributed.kv_transfer.kv_connector.v1.offloading.common import (\n"
            "    OffloadingWorkerMetadata,\n)\n"
            "from vllm.config import CacheConfig,",
        ).replace(
            "from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, "
            "KVCacheGroupSpec",
            "from vllm.v1.kv_cache_interface import (\n    FullAttentionSpec, KVCacheConfig, "
            "KVCacheGroupSpec, KVCacheTensor,\n)\n"
            "from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec",
        )
    if drafts:
        text = text.replace(
            "from vllm.config import CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, "
            "VllmConfig",
            "from vllm.config import (\n    CacheConfig, DeviceConfig, ModelConfig, "
            "ParallelConfig, SchedulerConfig, SpeculativeConfig,\n    VllmConfig,\n)",
        ).replace(
            "from vllm.v1.outputs import ModelRunnerOutput",
            "from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput",
        )
    return text


def _release(setup: EngineSetup) -> str:
    """The release installed at the setup's root, as pip names it ("vllm" for a checkout
    whose version is not recorded beside it)."""
    try:
        dist = importlib.metadata.Distribution.at(next(Path(setup.root).glob("vllm-*.dist-info")))
        return f"vllm=={dist.version}"
    except (StopIteration, OSError):
        return "vllm"


def render(setup: EngineSetup, trace: EngineTrace) -> Rendered | str:
    """vLLM's calls for the exported test."""
    w = trace.workload
    if w.config.max_adapters or any(r.namespace for r in w.requests):
        return "LoRA adapters or cache salts (the test sends neither)"
    mode = Mode.parse(w.config.mode or setup.modes[0])
    looks = bool(setup.config.get("looks_at_device", False))
    cls = "AsyncScheduler" if mode.overlapped else "Scheduler"
    imported = "from vllm.v1.core.sched.scheduler import Scheduler"
    if mode.overlapped:
        imported = "from vllm.v1.core.sched.async_scheduler import AsyncScheduler\n" + imported
    facts = [
        "",
        f"EOS = {EOS}",
        "# one tiny llama layer: a config.json, no weights",
        f"MODEL = {pprint.pformat(MODEL, width=88, sort_dicts=False)}",
        f"ASYNC = {mode.overlapped}  # async scheduling (mode {mode.name})",
        f"V2 = {mode.protocol == 'v2'}  # the v2 model runner's protocol",
        f"EAGER_ABORTS = {bool(setup.config.get('eager_aborts', False))}  # _process_aborts_queue",
        f"LOOKS_AT_DEVICE = {looks}  # step_with_batch_queue asks batch.done()",
    ]
    if looks:
        facts.append(f"EARLY = {set(w.early) or 'set()'}  # steps the device finished first")
    held = bool(w.drafts) and mode.protocol == "v2"
    facts.append(f"WORKER_DRAFTS = {held}  # the v2 runner keeps its drafts; -1s are sent")
    if held:
        every = bool(setup.config.get("every_draft", False))
        facts.append(f"EVERY_DRAFT = {every}  # it reports every request it drafts for")
    if w.drafts and w.drafter != "lookup":
        facts.append(f"METHOD = {METHODS[w.drafter]!r}  # the drafter: {DRAFTERS[w.drafter]}")
        facts.append(f"DRAFT_FOLDER = {DRAFT_FOLDERS[w.drafter]!r}")
    sessions = sorted(r.name for r in w.requests if r.session)
    if sessions:
        named = ", ".join(map(repr, sessions))  # in order: the file reads the same every time
        facts.append(f"SESSIONS = {{{named}}}  # streaming-input sessions (resumable)")
    if w.draft_schedule:  # the proposer drafts what the scheduler asks (Core.asked)
        schedule = [list(e) for e in w.draft_schedule]
        facts.append(f"SCHEDULE = {schedule!r}  # [first, last batch size, drafts] ranges")
    speculative = (SPECULATIVE if w.drafter == "lookup" else SPECULATIVE_MODEL).replace(
        "{schedule}",
        "\n    num_speculative_tokens_per_batch_size=SCHEDULE," if w.draft_schedule else "",
    )
    propose = "" if not w.drafts or mode.overlapped else PROPOSE_HELD if held else PROPOSE
    offloading = w.connector == "offloading"
    if w.connector:
        facts.append(f"LOAD_FAILURE = {w.load_failure!r}  # kv_load_failure_policy")
    if offloading:  # vLLM's own connector, its worker played as the run played it
        facts += [
            f"OFFLOAD_BLOCKS = {w.offload_blocks}  # the CPU tier's size, in blocks",
            "# the steps each load job and each store job of a request takes",
            f"JOB_STEPS = { ({r.name: (r.load, r.save) for r in w.requests})!r}",
        ]
    elif w.connector:  # the test's own connector, both sides as the run played them
        steps = {r.name: (r.load, r.save, r.lookup_wait) for r in w.requests}
        fails = {r.name: r.load_fails for r in w.requests if r.load_fails}
        facts += [
            f"VOCAB = {w.vocab}  # the model's tokens: 1..VOCAB",
            f"STORED = {[list(p) for p in w.stored]!r}  # the external store holds their KV",
            "# the steps each request's load (0: synchronous) and save (0: none) take, and",
            "# the lookups of it its connector answers 'not yet'",
            f"TRANSFER_STEPS = {steps!r}",
            f"LOAD_FAILS = {fails!r}  # the blocks of a load that fail, counted from its first",
        ]
    release = _release(setup)
    build = (
        BUILD.replace("{cls}", cls)
        .replace("{speculative}", speculative if w.drafts else "")
        .replace("{spec_arg}", "\n    speculative_config=speculative," if w.drafts else "")
        .replace(
            "{offload_config}",
            OFFLOAD_CONFIG if offloading else STORE_CONFIG if w.connector else "",
        )
        .replace("{transfer_arg}", "\n    kv_transfer_config=transfer," if w.connector else "")
        .replace("{offload_tensors}", OFFLOAD_TENSORS if offloading else "")
        .replace("{tensors}", "tensors" if offloading else "[]")
    )
    if w.layers:  # a hybrid model: its groups laid out by vLLM's planner, in the test too
        facts.append(f"LAYERS = {list(w.layers)!r}  # beside full attention: a group each")
        one = build.index("groups = [KVCacheGroupSpec(")
        build = (
            build[:one]
            + "kv_cache_config = hybrid_kv_cache_config(vllm_config, spec)\n"
            + (build[build.index("init_none_hash(block_hash)") :])
        )
    if w.connector:
        worker = "Offload()" if offloading else "Transfers()"
        build = build.replace(
            "return Core(scheduler)", f"core = Core(scheduler)\ncore.worker = {worker}\nreturn core"
        )
    helpers = {"offloading": OFFLOAD_WORKER, "simulated": STORE_CONNECTOR}.get(w.connector, "")
    helpers += HYBRID_PLAN if w.layers else ""
    return Rendered(
        engine=release,
        title=f"vLLM {release.removeprefix('vllm==')} ({mode.name})" if "==" in release else "",
        imports=_imports(imported, bool(w.drafts), w.connector) + "\n" + "\n".join(facts),
        helpers=CORE.strip().replace("{propose}", propose) + helpers.rstrip(),
        build_body=build,
        spec=True,
        add_body=ADD_SESSION if sessions else ADD,
        send_body=SEND,
        connectors=("offloading", "simulated"),
        abort_body=ABORT,
        reset_body=RESET,
        step_body="engine.step(n, seen)",
        pool_body=POOL,
        state_body="return engine.state()",
        # with a connector the engine core steps while its jobs run (has_requests)
        done_body="return not engine.has_requests() and not engine.queue"
        if w.connector
        else "return not engine.scheduler.get_num_unfinished_requests() and not engine.queue",
        unfinished_body="return [n for n, r in requests.items() if not r.is_finished()]",
        # the fail policy's request: FINISHED_ERROR
        layers=True,
        failed_body="return {n for n, r in requests.items()\n"
        "        if r.status == RequestStatus.FINISHED_ERROR}",
        # a session's Request holds its last turn's output: its client was streamed all
        outputs_body=(
            "return {n: engine.streamed.get(n, []) if n in SESSIONS else list(r.output_token_ids)"
            "\n        for n, r in requests.items()}"
            if sessions
            else "return {n: list(r.output_token_ids) for n, r in requests.items()}"
        ),
        decorators=("@pytest.mark.cpu_test",),
        replaced=(
            "the model, by a config.json of one tiny llama layer and no weights; the block hash, "
            "by a sha256 of its input (the release's own moved between modules)",
            "the model runner: each step's tokens are read from NEXT for the positions "
            "vLLM's runner computes (num_computed_tokens onwards, num_scheduled_tokens of "
            "them); in async mode a token sampled stays in flight until its step's update"
            + (
                ""
                if mode.protocol == "v2"
                else " (the v1 runner's own copy of each request's tokens is not played: where "
                "a scheduler bug makes it differ from the scheduler's, the test may not fail "
                "as schedcheck's run did)"
            ),
            *(
                (
                    "the model's KV cache groups, laid out by vLLM's own planner from one "
                    "full-attention layer and one layer of each kind in LAYERS (a sliding "
                    "window, chunked local attention, a Mamba state), scaled down to a few "
                    "tokens",
                )
                if w.layers
                else ()
            ),
            *(
                (
                    "the KV connector, by StoreConnector, written in the test over an external "
                    "store of token lists, its worker played by Transfers as schedcheck's run "
                    "played it: a model reading KV a failed load left says a wrong token",
                )
                if w.connector == "simulated"
                else ()
            ),
        ),
    )
