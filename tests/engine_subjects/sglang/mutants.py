"""Mutants of SGLang's real scheduler, made here: each patches one behaviour of a freshly
built SGLang Scheduler (Build.patch) the way a scheduler change could break it, and names
the check that must catch it (tests/engine/test_sglang.py). Written against SGLang 0.5.23."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple


class SglangMutant(NamedTuple):
    name: str
    check: str  # the check that must fire
    bug: str
    patch: Callable[[Any], None]


def _each_queued(scheduler: Any, change: Callable[[Any], None]) -> None:
    """Patch the scheduler so that `change` is made to each request as it is queued
    (`_add_request_to_queue`: an arrival, and a retracted request requeued)."""
    add = scheduler._add_request_to_queue

    def changed(req: Any, is_retracted: bool = False) -> None:
        change(req)
        add(req, is_retracted=is_retracted)

    scheduler._add_request_to_queue = changed


def double_free(scheduler: Any) -> None:
    """A request's released slots are freed twice: its row's last range again."""
    tree = scheduler.tree_cache
    free = tree.free_kv_row

    def twice(kv: Any, ranges: list[tuple[int, int]]) -> Any:
        free(kv, ranges)
        return free(kv, [r for r in ranges if r[0] < r[1]][-1:])

    tree.free_kv_row = twice


def lock_kept(scheduler: Any) -> None:
    """A request that finishes or is retracted keeps its lock on the tree's nodes."""
    scheduler.tree_cache.unlock = lambda *args, **kwargs: None


def requeue_at_head(scheduler: Any) -> None:
    """A retracted request goes back to the head of the waiting queue, not its tail."""
    add = scheduler._add_request_to_queue

    def at_head(req: Any, is_retracted: bool = False) -> None:
        add(req, is_retracted=is_retracted)
        if is_retracted and req in scheduler.waiting_queue:
            scheduler.waiting_queue.remove(req)
            scheduler.waiting_queue.insert(0, req)

    scheduler._add_request_to_queue = at_head


def hit_on_freed(scheduler: Any) -> None:
    """A released request frees its row from position 0, the part the tree owns too: the
    tree keeps slots that are free, and the next request with that prefix hits them."""
    tree = scheduler.tree_cache
    free = tree.free_kv_row

    def from_zero(kv: Any, ranges: list[tuple[int, int]]) -> Any:
        return free(kv, [(0, end) for _, end in ranges[:1]] + list(ranges[1:]))

    tree.free_kv_row = from_zero


def row_kept(scheduler: Any) -> None:
    """A finished or retracted request's row of req_to_token is never given back."""
    scheduler.req_to_token_pool.free = lambda *args, **kwargs: None


def eos_ignored(scheduler: Any) -> None:
    """A request's eos and stop tokens are ignored: it runs on to max_new_tokens."""

    def ignoring(req: Any) -> None:
        req.sampling_params.ignore_eos = True

    _each_queued(scheduler, ignoring)


def row_on_free_page(scheduler: Any) -> None:
    """After a result is processed, a running request's last private slot is put back in
    the free list and another free slot dropped from it: the counts balance (SGLang's own
    check, free + evictable + protected + private = the pool, holds) while the row points
    at a slot the allocator will hand out again. Pages of one slot (the token allocator)."""
    process = scheduler.process_batch_result

    def freed(batch: Any, result: Any) -> Any:
        done = process(batch, result)
        allocator = scheduler.token_to_kv_pool_allocator
        if scheduler.page_size != 1 or not len(allocator.free_pages):
            return done
        for req in scheduler.running_batch.reqs:
            kv = req.kv
            if kv.req_pool_idx is None or kv.kv_allocated_len <= kv.cache_protected_len:
                continue
            row = scheduler.req_to_token_pool.req_to_token[kv.req_pool_idx]
            slot = row[kv.kv_allocated_len - 1 : kv.kv_allocated_len].to(allocator.free_pages)
            allocator.free_pages = allocator.free_pages.new_tensor(
                [*allocator.free_pages[1:].tolist(), *slot.tolist()]
            )
            break
        return done

    scheduler.process_batch_result = freed


def gap_ignored(scheduler: Any) -> None:
    """Preemption for priority without its threshold: a running request of the same
    priority as the waiting one (a difference of 0, not more than the gap) is preempted."""
    scheduler.priority_scheduling_preemption_threshold = -1


def namespace_dropped(scheduler: Any) -> None:
    """A request's cache namespace (`extra_key`, `cache_salt`) dropped as it is queued: the
    radix tree matches it against every namespace's prefixes."""

    def keyless(req: Any) -> None:
        req.extra_key, req.cache_salt = None, None

    _each_queued(scheduler, keyless)


def logprob_cap_ignored(scheduler: Any) -> None:
    """A request's prefix match not capped at its logprob start: the tree may supply
    positions whose prompt logprobs its client asked (the cap of
    `Req._compute_max_prefix_len`, left out for each request queued)."""

    def uncapped(req: Any) -> None:
        req._compute_max_prefix_len = lambda input_len: max(input_len - 1, 0)

    _each_queued(scheduler, uncapped)


def retracts_by_length(scheduler: Any) -> None:
    """`--retraction-policy priority` ignored: the decode retraction order by output length
    and prompt alone, for this scheduler's calls (the class's static method swapped for
    the call and put back)."""
    from sglang.srt.managers.schedule_batch import ScheduleBatch

    update = scheduler.update_running_batch

    def order(reqs: list[Any]) -> list[int]:
        indices = list(range(len(reqs)))
        indices.sort(
            key=lambda i: (len(reqs[i].output_ids), -len(reqs[i].origin_input_ids)),
            reverse=True,
        )
        return indices

    def by_length(*args: Any, **kwargs: Any) -> Any:
        real = ScheduleBatch.__dict__["_get_decode_retraction_order"]
        ScheduleBatch._get_decode_retraction_order = staticmethod(order)
        try:
            return update(*args, **kwargs)
        finally:
            ScheduleBatch._get_decode_retraction_order = real

    scheduler.update_running_batch = by_length


def drafts_unverified(scheduler: Any) -> None:
    """Speculative decoding: a verify's whole width taken as accepted, the positions the
    model did not agree with among them: tokens no model produced are appended to the
    output and committed (and would go into the tree with the request's KV): the output
    is not the model's (E7); where the request verifies again, the worker went on from
    the run it accepted, so the verify starts behind the tokens the request holds (E1)."""
    processor = scheduler.batch_result_processor
    real = type(processor)

    class Whole(real):  # type: ignore[misc,valid-type]
        # the processor is a frozen dataclass of slots: a copy of it, of a subclass whose
        # method is replaced, takes its place on this scheduler alone
        __slots__ = ()

        def _resolve_spec_v2_tokens(self, result: Any, batch: Any) -> Any:
            width = int(result.speculative_num_draft_tokens)
            result.accept_lens = result.accept_lens.clone().fill_(width)
            return real._resolve_spec_v2_tokens(self, result, batch)

    fields = dataclasses.fields(processor)
    scheduler.batch_result_processor = Whole(**{f.name: getattr(processor, f.name) for f in fields})


def rejected_slots_freed(scheduler: Any) -> None:
    """Speculative decoding: after each result, the slots a running request's row holds
    past its committed KV (its rejected drafts' and its reserve) are given back to the
    allocator, but the row keeps naming them (`kv_allocated_len` unchanged): its next
    verify writes into slots another request may hold."""
    process = scheduler.process_batch_result

    def freed(batch: Any, result: Any) -> Any:
        done = process(batch, result)
        if scheduler.draft_worker is None:
            return done
        page = int(scheduler.page_size)
        rows = scheduler.req_to_token_pool.req_to_token
        for req in scheduler.running_batch.reqs:
            kv = req.kv
            start = -(-int(kv.kv_committed_len) // page) * page
            if kv.req_pool_idx is not None and start < int(kv.kv_allocated_len):
                slots = rows[kv.req_pool_idx, start : int(kv.kv_allocated_len)]
                scheduler.token_to_kv_pool_allocator.free(slots.to(dtype=rows.dtype).clone())
        return done

    scheduler.process_batch_result = freed


def retracted_exempt(scheduler: Any) -> None:
    """Not a mutant: SGLANG-01's fix (PR sgl-project/sglang#37260, open), a retracted
    request requeued without the queue limit meant for new arrivals."""
    add = scheduler._add_request_to_queue

    def exempt(req: Any, is_retracted: bool = False) -> None:
        if not is_retracted:
            return add(req, is_retracted=is_retracted)
        limit, scheduler.max_queued_requests = scheduler.max_queued_requests, None
        try:
            return add(req, is_retracted=is_retracted)
        finally:
            scheduler.max_queued_requests = limit

    scheduler._add_request_to_queue = exempt


def adapter_limit_ignored(scheduler: Any) -> None:
    """Admission asks nothing of the LoRA pool: a request of any adapter joins the batch,
    however many adapters it already runs (`validate_lora_batch` always yes)."""
    scheduler.tp_worker.model_runner.lora_manager.validate_lora_batch = lambda ids: True


def adapter_key_dropped(scheduler: Any) -> None:
    """A request's LoRA adapter not joined to its extra key as it is queued: the radix tree
    matches it against the base model's and every adapter's prefixes."""

    def keyless(req: Any) -> None:
        lora, key = req.lora_id, req.extra_key
        if lora and key and key.endswith(lora):
            req.extra_key = key[: -len(lora)] or None

    _each_queued(scheduler, keyless)


ADAPTER_MUTANTS = (
    SglangMutant(
        "adapter_limit_ignored",
        "E25",
        "a batch of more LoRA adapters than max_loras_per_batch",
        adapter_limit_ignored,
    ),
    SglangMutant(
        "adapter_key_dropped",
        "E23",
        "a request's LoRA adapter left out of its cache key",
        adapter_key_dropped,
    ),
)
"""Mutants of SGLang's LoRA admission and cache key (tests/engine/test_sglang_adapters.py)."""


def embeds_kept(scheduler: Any) -> None:
    """A request whose prompt carries embeddings of its own has its KV kept in the radix
    tree all the same (`skip_radix_cache_insert` cleared as it is queued): a later request
    of the same tokens is served KV the overrides computed."""

    def kept(req: Any) -> None:
        req.skip_radix_cache_insert = False

    _each_queued(scheduler, kept)


def embeds_matched(scheduler: Any) -> None:
    """A request whose prompt carries embeddings of its own is matched against the tree
    like any other (its overrides hidden from `init_next_round_input`): it starts over KV
    computed from its tokens alone."""

    def matched(req: Any) -> None:
        if req.positional_embed_overrides is None:
            return
        init = req.init_next_round_input

        def plain_match(*args: Any, **kwargs: Any) -> Any:
            held, req.positional_embed_overrides = req.positional_embed_overrides, None
            try:
                return init(*args, **kwargs)
            finally:
                req.positional_embed_overrides = held

        req.init_next_round_input = plain_match

    _each_queued(scheduler, matched)


EMBEDS_MUTANTS = (
    SglangMutant(
        "embeds_kept",
        "E23",
        "a request's KV computed with embedding overrides kept in the radix tree",
        embeds_kept,
    ),
    SglangMutant(
        "embeds_matched",
        "E23",
        "a request carrying embedding overrides matched against the radix tree",
        embeds_matched,
    ),
)
"""Mutants of SGLang's rule for prompts carrying embeddings (tests/engine/test_sglang_embeds.py)."""


def session_kv_leaked(scheduler: Any) -> None:
    """A streaming session's slot is never released when its client closes it: its KV
    and its row stay held by nobody."""
    scheduler.tree_cache.release_session = lambda *args, **kwargs: None


def turn_history_short(scheduler: Any) -> None:
    """A streaming session's next turn continues from its last turn's output but its last
    token (vLLM's rule, in SGLang, whose client is streamed every token)."""
    controller = scheduler.session_controller
    opened = controller.open

    def open_session(recv: Any) -> Any:
        out = opened(recv)
        session = controller.sessions.get(recv.session_id)
        if session is not None:
            for name in ("_share_token_arrays", "_concat_token_arrays"):
                setattr(session, name, _short(getattr(session, name)))
        return out

    controller.open = open_session


def _short(build: Callable[..., Any]) -> Callable[..., Any]:
    def short(last_req: Any, *args: Any) -> Any:
        kept = last_req.output_ids
        last_req.output_ids = kept[:-1]
        try:
            return build(last_req, *args)
        finally:
            last_req.output_ids = kept

    return short


SESSION_MUTANTS = (
    SglangMutant(
        "session_kv_leaked",
        "E3",
        "a streaming session's KV kept after its close",
        session_kv_leaked,
    ),
    SglangMutant(
        "turn_history_short",
        "E7",
        "a session's next turn continuing from its last output but the last token",
        turn_history_short,
    ),
)
"""Mutants of SGLang's streaming sessions (tests/engine/test_sglang_sessions.py)."""

MUTANTS = (
    SglangMutant("double_free", "E3", "a request's released slots freed twice", double_free),
    SglangMutant("lock_kept", "E3", "a tree lock not released when a request ends", lock_kept),
    SglangMutant(
        "requeue_at_head", "E14", "a retracted request requeued at the head", requeue_at_head
    ),
    SglangMutant("hit_on_freed", "E3", "a cache hit on slots that were freed", hit_on_freed),
    SglangMutant("row_kept", "E3", "a request's row never given back", row_kept),
    SglangMutant("eos_ignored", "E7", "a request's eos ignored", eos_ignored),
    SglangMutant(
        "row_on_free_page",
        "E3",
        "a live row's slot in the free list, the counts balanced",
        row_on_free_page,
    ),
    SglangMutant(
        "gap_ignored", "E22", "preemption for priority without its threshold", gap_ignored
    ),
    SglangMutant(
        "namespace_dropped",
        "E23",
        "a request's cache namespace dropped: prefixes shared across namespaces",
        namespace_dropped,
    ),
    SglangMutant(
        "logprob_cap_ignored",
        "E24",
        "a prefix hit past the position prompt logprobs are asked from",
        logprob_cap_ignored,
    ),
    SglangMutant(
        "retracts_by_length",
        "E14",
        "retraction by length where the server retracts by priority",
        retracts_by_length,
    ),
    SglangMutant(
        "drafts_unverified",
        "E7",
        "a verify's whole width accepted, its unverified drafts in the output and the tree",
        drafts_unverified,
    ),
    SglangMutant(
        "rejected_slots_freed",
        "E3",
        "a running request's slots past its committed KV freed, its row still naming them",
        rejected_slots_freed,
    ),
)
