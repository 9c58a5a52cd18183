"""Mutants of vLLM's real scheduler, made here: each patches one behaviour of a freshly built
vLLM Scheduler (Build.patch) the way a scheduler change could break it, and names the check
that must catch it (tests/engine/test_vllm.py). Written against vLLM's v1 API (0.33)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple


class VllmMutant(NamedTuple):
    name: str
    check: str  # the check that must fire
    bug: str
    patch: Callable[[Any], None]
    # checks switched off to see this one fire (one that fires first on the same bug)
    off: frozenset[str] = frozenset()
    # the modes searched (modes.py's names): the mode the mutant was written against
    modes: tuple[str, ...] = ("sync-v1",)
    # the model runner protocol its bug is in ("": any; on a release without that protocol,
    # its modes are searched in the one the release has)
    protocol: str = ""
    drafts: bool = False  # searched with speculative decoding drawn (--features spec)
    # searched with this KV connector drawn (--features connector; "": none)
    connector: str = ""
    sessions: bool = False  # searched with streaming-input sessions drawn (--features sessions)
    layers: bool = False  # searched with hybrid models drawn (--features hybrid)

    def on(self, has: tuple[str, ...]) -> tuple[str, ...]:
        """Its modes on a release that has the modes `has` (empty: its bug's code path is
        not in that release)."""
        if self.protocol:
            return tuple(m for m in self.modes if m in has)
        kept = tuple(m for m in self.modes if m in has)
        moved = (f"{m.partition('-')[0]}-{p}" for m in self.modes for p in ("v1", "v2"))
        return kept or tuple(dict.fromkeys(m for m in moved if m in has))


def lora_limit_ignored(scheduler: Any) -> None:
    """The scheduler reads no LoRA config: a waiting request of any adapter is admitted,
    however many adapters the running requests hold (`max_loras` not kept)."""
    scheduler.lora_config = None


def keys_unhashed(scheduler: Any) -> None:
    """The block hasher leaves a request's cache salt and LoRA adapter out of its blocks'
    hashes: a prefix another namespace or adapter computed is a hit."""
    real = scheduler.schedcheck_hasher

    def hasher(request: Any) -> Any:
        salt, lora = request.cache_salt, request.lora_request
        request.cache_salt, request.lora_request = None, None
        try:
            return real(request)
        finally:
            request.cache_salt, request.lora_request = salt, lora

    scheduler.schedcheck_hasher = hasher


KEY_MUTANTS = (
    VllmMutant(
        "lora_limit_ignored", "E25", "more LoRA adapters running than max_loras", lora_limit_ignored
    ),
    VllmMutant(
        "keys_unhashed",
        "E23",
        "a block's hash without its request's cache salt and adapter",
        keys_unhashed,
    ),
)
"""Mutants of vLLM's LoRA admission and block keys (tests/engine/test_vllm_adapters.py)."""


def lookahead_unreserved(scheduler: Any) -> None:
    """A drafter's lookahead slots not reserved: allocate_slots asked for the step's tokens
    only (its `num_lookahead_tokens` argument 0), for a draft model or an EAGLE head."""
    scheduler.num_lookahead_tokens = 0


def save_freed_early(scheduler: Any) -> None:
    """A finished request's blocks freed though the connector asked to keep them for its
    save (request_finished returned True): the delay dropped."""
    finished = scheduler._connector_finished

    def dropped(request: Any) -> Any:
        _, params = finished(request)
        return False, params

    scheduler._connector_finished = dropped


def window_frees_inside(scheduler: Any) -> None:
    """A sliding-window manager that counts one token too many out of the window: a block
    whose last position the next step still reads is freed, the null block in its place
    (a hybrid model's, issue 51)."""
    for manager in scheduler.kv_cache_manager.coordinator.single_type_managers:
        if type(manager).__name__ == "SlidingWindowManager":
            skipped = manager.get_num_skipped_tokens
            manager.get_num_skipped_tokens = lambda n, skipped=skipped: skipped(n) + 1


def hit_from_one_group(scheduler: Any) -> None:
    """A prefix hit as long as full attention's, whatever the window or chunk group holds:
    the other group's finder agrees to any length, its missing blocks the null block (a hit
    length taken from one group only; a hybrid model's, issue 51). Written against 0.34's
    HybridKVCacheCoordinator (`attention_groups`, one finder class per kind)."""
    coordinator = scheduler.kv_cache_manager.coordinator
    for i, group in enumerate(getattr(coordinator, "attention_groups", ())):
        if i:  # full attention's is first
            coordinator.attention_groups[i] = group._replace(
                manager_cls=_agreeing(group.manager_cls)
            )


def _agreeing(manager: Any) -> Any:
    """`manager`'s class, its hit finder agreeing to the whole length it is asked for."""
    named = inspect.signature(manager.find_longest_cache_hit)

    class Agrees(manager):  # type: ignore[misc, valid-type]
        @classmethod
        def find_longest_cache_hit(cls, *a: Any, **k: Any) -> Any:
            found, _ = super().find_longest_cache_hit(*a, **k)
            said = named.bind(*a, **k).arguments
            pool, size = said["block_pool"], said["kv_cache_spec"].block_size
            whole = said["max_length"] // size
            for blocks in found:
                blocks.extend([pool.null_block] * (whole - len(blocks)))
            return found, whole * size

    return Agrees


def estimate_one_short(scheduler: Any) -> None:
    """The blocks a window or chunk group needs for a step counted one short (an
    allocation estimate that under-counts what the group takes; a hybrid model's, issue
    51): admission passes, and the allocation then finds the pool empty."""
    for manager in scheduler.kv_cache_manager.coordinator.single_type_managers:
        if type(manager).__name__ in ("SlidingWindowManager", "ChunkedLocalAttentionManager"):
            count = manager.get_num_blocks_to_allocate
            manager.get_num_blocks_to_allocate = lambda *a, count=count, **k: max(
                count(*a, **k) - 1, 0
            )


def split_unaligned(scheduler: Any) -> None:
    """A prefill chunk not cut at a block boundary for a Mamba layer's state (its
    `_mamba_block_aligned_split` a no-op): a state is left in the middle of a block that
    the prefix cache then names the prefix of its whole block (a Mamba state cached at an
    unaligned position; a hybrid model's, issue 51)."""
    scheduler._mamba_block_aligned_split = lambda request, num_new_tokens, *a, **k: num_new_tokens


def invalid_block_counted(scheduler: Any) -> None:
    """Blocks whose load failed left counted as computed: the worker's invalid_block_ids
    ignored (no request rolled back or failed, its sample kept)."""
    scheduler._handle_invalid_blocks = lambda invalid, scheduled: set()


def abort_not_told(scheduler: Any) -> None:
    """An aborted request's end not told to the connector (request_finished skipped on the
    abort path)."""
    finished = scheduler._connector_finished

    def skipped(request: Any) -> Any:
        if request.status.name == "FINISHED_ABORTED":
            return False, None
        return finished(request)

    scheduler._connector_finished = skipped


def flush_dropped(scheduler: Any) -> None:
    """vLLM's own offloading connector never asks its worker to flush a job before a step
    writes into the job's blocks: its metadata's jobs_to_flush emptied."""
    connector = scheduler.connector
    if connector is None:  # a workload without one
        return
    build = connector.build_connector_meta

    def unflushed(scheduler_output: Any) -> Any:
        meta = build(scheduler_output)
        meta.jobs_to_flush = set()
        return meta

    connector.build_connector_meta = unflushed


def recv_ignored(scheduler: Any) -> None:
    """The worker's report that a request's asynchronous load is done never reaches the
    waiting pass: its finished_recving dropped (the request waits for its KV for good)."""
    update = scheduler._update_from_kv_xfer_finished

    def dropped(output: Any) -> Any:
        return update(dataclasses.replace(output, finished_recving=None))

    scheduler._update_from_kv_xfer_finished = dropped


def chunk_without_kv(scheduler: Any) -> None:
    """A session's continuation chunk appended as if its KV were computed: the count set to
    the sequence less its last token when the chunk is applied."""
    apply = scheduler._update_request_as_session

    def counted(session: Any, update: Any) -> None:
        apply(session, update)
        session.num_computed_tokens = max(session.num_computed_tokens, session.num_tokens - 1)

    scheduler._update_request_as_session = counted


def session_blocks_kept(scheduler: Any) -> None:
    """A session's blocks kept after it ends (closed or finished): never given back."""
    free = scheduler._free_request_blocks

    def kept(request: Any) -> None:
        if request.streaming_queue is None:  # a session's (resumable) has a queue
            free(request)

    scheduler._free_request_blocks = kept


def double_free(scheduler: Any) -> None:
    """A finished or preempted request's last block is released twice."""
    manager, free = scheduler.kv_cache_manager, scheduler._free_request_blocks

    def twice(request: Any) -> None:
        blocks = list(manager.get_blocks(request.request_id).blocks[0])
        free(request)
        if blocks:
            manager.block_pool.free_blocks(blocks[-1:])

    scheduler._free_request_blocks = twice


def hit_stays_free(scheduler: Any) -> None:
    """A prefix-cache hit on a freed block takes it without taking it out of the free queue."""
    pool = scheduler.kv_cache_manager.block_pool

    def touch(blocks: Any) -> None:
        for block in blocks:
            if not block.is_null:
                block.ref_cnt += 1

    pool.touch = touch


def requeue_at_tail(scheduler: Any) -> None:
    """A preempted request goes back to the tail of the waiting queue, not its front."""
    scheduler.waiting.prepend_request = scheduler.waiting.add_request


def chunk_over_budget(scheduler: Any) -> None:
    """The step's token budget is one over max_num_batched_tokens (both the budget schedule()
    starts from and the input budget it also caps a chunk by)."""
    scheduler.max_num_scheduled_tokens += 1
    scheduler.scheduler_config.max_num_batched_tokens += 1


def _keeping(scheduler: Any, method: str, field: str) -> None:
    """Patch `scheduler.method(request, ...)` to leave `request.field` as it found it."""
    real = getattr(scheduler, method)

    def keep(request: Any, *args: Any, **kwargs: Any) -> Any:
        kept = getattr(request, field)
        result = real(request, *args, **kwargs)
        setattr(request, field, kept)
        return result

    setattr(scheduler, method, keep)


def keeps_computed(scheduler: Any) -> None:
    """A preempted request keeps its num_computed_tokens though its blocks were freed."""
    _keeping(scheduler, "_preempt_request", "num_computed_tokens")


def evict_keeps_hash(scheduler: Any) -> None:
    """A cached block handed out again keeps its hash in the prefix cache (never evicted)."""
    scheduler.kv_cache_manager.block_pool._maybe_evict_cached_block = lambda block: False


def loses_preempted(scheduler: Any) -> None:
    """A preempted request is dropped from the waiting queue: it waits forever, unfinished,
    while nothing is scheduled (the engine reports healthy and serves no one)."""
    preempt = scheduler._preempt_request

    def lose(request: Any, *args: Any, **kwargs: Any) -> None:
        preempt(request, *args, **kwargs)
        scheduler.waiting.remove_request(request)

    scheduler._preempt_request = lose


# Of the async path (issue 35): an AsyncScheduler's accounting of tokens in flight, and what
# its SchedulerOutput sends each runner protocol.


def placeholders_kept(scheduler: Any) -> None:
    """A preempted request keeps its num_output_placeholders (not zeroed in
    _preempt_request): counted in flight while it waits, scheduled past its tokens after."""
    _keeping(scheduler, "_preempt_request", "num_output_placeholders")


def placeholder_unresolved(scheduler: Any) -> None:
    """A token that lands does not resolve its placeholder (_update_request_with_output)."""
    _keeping(scheduler, "_update_request_with_output", "num_output_placeholders")


def resumed_truncated(scheduler: Any) -> None:
    """v2 protocol: a resumed request is sent as new without its last token
    (`prefill_token_ids` one short)."""
    schedule = scheduler.schedule

    def cut(*args: Any, **kwargs: Any) -> Any:
        out = schedule(*args, **kwargs)
        for new in out.scheduled_new_reqs:
            tokens = new.prefill_token_ids
            if tokens is not None and len(tokens) > len(new.prompt_token_ids):
                new.prefill_token_ids = list(tokens)[:-1]
        return out

    scheduler.schedule = cut


def readded_short(scheduler: Any) -> None:
    """v1 protocol: a request coming back into the runner's batch (skipped for a step, or
    resumed) is sent all_token_ids without its last token."""
    make = scheduler._make_cached_request_data

    def short(*args: Any, **kwargs: Any) -> Any:
        data = make(*args, **kwargs)
        for name, tokens in data.all_token_ids.items():
            data.all_token_ids[name] = list(tokens)[:-1]
        return data

    scheduler._make_cached_request_data = short


# Of speculative decoding (issue 49), in the sync modes it is driven in: the drafts' rollback
# and the drafts handed to the scheduler.


def rejected_kept(scheduler: Any) -> None:
    """Rejected drafts are not rolled back: update_from_output leaves num_computed_tokens
    counting the draft positions the model did not accept."""
    update = scheduler.update_from_output

    def keep(out: Any, result: Any) -> Any:
        before = {
            n: scheduler.requests[n].num_computed_tokens
            for n in out.scheduled_spec_decode_tokens
            if n in scheduler.requests
        }
        made = update(out, result)
        for name, computed in before.items():
            request = scheduler.requests.get(name)
            if request is not None and not request.is_finished():
                request.num_computed_tokens = computed
        return made

    scheduler.update_from_output = keep


def drafts_a_step_late(scheduler: Any) -> None:
    """The drafts handed over after a step are kept back one step: each request is scheduled
    the drafts proposed after the step before its last (stale drafts, each rejected)."""
    hand = scheduler.update_draft_token_ids
    late: dict[str, list[int]] = {}

    def delayed(drafts: Any) -> None:
        fresh = dict(zip(drafts.req_ids, drafts.draft_token_ids, strict=True))
        drafts.draft_token_ids = [late.get(n, []) for n in drafts.req_ids]
        late.update(fresh)
        hand(drafts)

    scheduler.update_draft_token_ids = delayed


def cached_over_drafts(scheduler: Any) -> None:
    """Blocks cached over the drafts a step computes, before they are verified: after each
    schedule(), a request's blocks that its drafts fill are hashed as if the drafts were
    its tokens and put in the prefix cache (vLLM caches up to `request.num_tokens`, which
    leaves drafts out). A rejected draft's position is computed again with the verified
    token, under a hash that names the draft."""
    schedule = scheduler.schedule

    def eager() -> Any:
        out = schedule()
        for name, drafts in out.scheduled_spec_decode_tokens.items():
            request = scheduler.requests.get(name)
            if request is None or not drafts:
                continue  # (a v2 runner's drafts are -1s here: hashed as they are sent)
            ahead = copy.copy(request)
            ahead._all_token_ids = [*request.all_token_ids, *drafts]
            ahead.all_token_ids = ahead._all_token_ids
            ahead.block_hashes = list(request.block_hashes)
            kept = len(request.block_hashes)
            request.block_hashes.extend(request._block_hasher(ahead))
            scheduler.kv_cache_manager.cache_blocks(request, request.num_computed_tokens)
            del request.block_hashes[kept:]
        return out

    scheduler.schedule = eager


def drafts_counted_twice(scheduler: Any) -> None:
    """Async scheduling counts a step's drafts twice among the tokens in flight: after each
    schedule(), a request's num_output_placeholders grows by its drafts once more."""
    after = scheduler._update_after_schedule

    def twice(out: Any) -> None:
        after(out)
        for name, drafts in out.scheduled_spec_decode_tokens.items():
            request = scheduler.requests.get(name)
            if request is not None and not request.is_prefill_chunk:
                request.num_output_placeholders += len(drafts)

    scheduler._update_after_schedule = twice


def none_accepted_as_minus_one(scheduler: Any) -> None:
    """The draft metrics count a request none of whose drafts was accepted as -1 accepted
    (`len(generated) - 2`, an off-by-one of the kind `max(len(generated) - 1, 0)` fixed)."""
    make = scheduler.make_spec_decoding_stats

    def off_by_one(*args: Any, **kwargs: Any) -> Any:
        kwargs["num_accepted_tokens"] = kwargs.get("num_accepted_tokens") or -1
        return make(*args, **kwargs)

    scheduler.make_spec_decoding_stats = off_by_one


MUTANTS = (
    VllmMutant("double_free", "E3", "a block freed twice", double_free),
    VllmMutant("hit_stays_free", "E3", "a cache hit on a freed block left free", hit_stays_free),
    VllmMutant(
        "requeue_at_tail", "E10", "a preempted request requeued at the tail", requeue_at_tail
    ),
    VllmMutant("chunk_over_budget", "E4", "a chunk over the token budget", chunk_over_budget),
    VllmMutant("keeps_computed", "E2", "preemption keeps num_computed_tokens", keeps_computed),
    # E3 sees the stale hash on the block handed out; E2 the KV read through it, later
    VllmMutant("evict_keeps_hash", "E3", "eviction keeps the stale hash", evict_keeps_hash),
    # E10 sees it first (the victim is not at the front of the waiting queue: it is gone)
    VllmMutant(
        "loses_preempted", "E5", "a preempted request lost", loses_preempted, frozenset({"E10"})
    ),
    VllmMutant(
        "placeholders_kept",
        "E11",
        "preemption keeps the placeholders",
        placeholders_kept,
        modes=("async-v2",),
    ),
    VllmMutant(
        "placeholder_unresolved",
        "E11",
        "a landed token leaves its placeholder",
        placeholder_unresolved,
        modes=("async-v2",),
    ),
    VllmMutant(
        "resumed_truncated",
        "E8",
        "a resumed request sent one token short (v2)",
        resumed_truncated,
        modes=("async-v2", "sync-v2"),
        protocol="v2",
    ),
    VllmMutant(
        "readded_short",
        "E8",
        "a request back in the batch sent all_token_ids one short (v1)",
        readded_short,
        modes=("async-v1",),
        protocol="v1",
    ),
    # E13 sees the wasted step first: a request that counts its rejected drafts as computed
    # has nothing left to compute, and waits for good
    VllmMutant(
        "rejected_kept",
        "E5",
        "rejected drafts not rolled back (speculative decoding)",
        rejected_kept,
        frozenset({"E13"}),
        modes=("sync-v2", "async-v2"),
        drafts=True,
    ),
    VllmMutant(
        "drafts_counted_twice",
        "E11",
        "async scheduling counts a step's drafts twice in flight (speculative decoding)",
        drafts_counted_twice,
        modes=("async-v2",),
        protocol="v2",
        drafts=True,
    ),
    VllmMutant(
        "none_accepted_as_minus_one",
        "E16",
        "the draft metrics count no draft accepted as -1 (speculative decoding)",
        none_accepted_as_minus_one,
        modes=("async-v2",),
        drafts=True,
    ),
    VllmMutant(
        "lookahead_unreserved",
        "E17",
        "a drafter's lookahead slots not reserved (speculative decoding, a draft model or head)",
        lookahead_unreserved,
        modes=("async-v2", "sync-v2"),
        drafts=True,
    ),
    # The scheduler sends draft values only to the v1 runner (the v2 runner keeps its own
    # and is sent -1s): stale drafts are a v1 bug
    VllmMutant(
        "cached_over_drafts",
        "E2",
        "blocks cached over unverified drafts (speculative decoding)",
        cached_over_drafts,
        modes=("sync-v2", "sync-v1"),
        drafts=True,
    ),
    VllmMutant(
        "drafts_a_step_late",
        "E15",
        "each request scheduled the drafts of the step before (speculative decoding)",
        drafts_a_step_late,
        modes=("sync-v1",),
        protocol="v1",
        drafts=True,
    ),
    # a KV connector's paths (issue 50), under the fail policy for a failed load (the
    # release's recompute path fails on its own: VLLM-12, VLLM-13)
    VllmMutant(
        "save_freed_early",
        "E18",
        "a finished request's blocks freed while the connector's save of them runs",
        save_freed_early,
        modes=("sync-v2", "async-v2"),
        connector="simulated",
    ),
    VllmMutant(
        "invalid_block_counted",
        "E7",
        "blocks whose load failed left counted as computed (KV connector)",
        invalid_block_counted,
        modes=("sync-v2",),
        connector="simulated",
    ),
    VllmMutant(
        "abort_not_told",
        "E19",
        "an aborted request's end not told to the KV connector",
        abort_not_told,
        modes=("sync-v2",),
        connector="simulated",
    ),
    VllmMutant(
        "flush_dropped",
        "E18",
        "an offloading job not flushed before its blocks are written again",
        flush_dropped,
        modes=("sync-v2", "async-v2"),
        connector="offloading",
    ),
    VllmMutant(
        "recv_ignored",
        "E5",
        "an asynchronous load's end never taken by the waiting pass",
        recv_ignored,
        modes=("sync-v2", "async-v2"),
        connector="offloading",
    ),
    # streaming-input sessions (issue 50), with no max_model_len cap drawn (a session that
    # grows past it livelocks the release: VLLM-14)
    VllmMutant(
        "chunk_without_kv",
        "E2",
        "a session's continuation chunk appended without its KV",
        chunk_without_kv,
        modes=("sync-v2", "async-v2"),
        sessions=True,
    ),
    VllmMutant(
        "session_blocks_kept",
        "E3",
        "a session's blocks kept after it ends",
        session_blocks_kept,
        modes=("sync-v2",),
        sessions=True,
    ),
    # hybrid models (issue 51): a window or a chunk beside full attention; in sync mode
    # (async scheduling frees a window's blocks on the tokens processed, one step behind,
    # which hides a count one token too many)
    VllmMutant(
        "window_frees_inside",
        "E2",
        "a sliding window's block freed while the window still reads it",
        window_frees_inside,
        modes=("sync-v2",),
        layers=True,
    ),
    VllmMutant(
        "hit_from_one_group",
        "E2",
        "a prefix hit's length taken from full attention's group only",
        hit_from_one_group,
        modes=("sync-v2", "async-v2"),
        layers=True,
    ),
    VllmMutant(
        "split_unaligned",
        "E2",
        "a Mamba layer's prefill chunk not cut at a block boundary",
        split_unaligned,
        modes=("sync-v2", "async-v2"),
        layers=True,
    ),
    VllmMutant(
        "estimate_one_short",
        "E6",
        "a window's or chunk's blocks for a step counted one short",
        estimate_one_short,
        modes=("sync-v2", "async-v2"),
        layers=True,
    ),
)
