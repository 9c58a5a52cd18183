"""Mutants of SGLang's real scheduler, made here: each patches one behaviour of a freshly
built SGLang Scheduler (Build.patch) the way a scheduler change could break it, and names
the check that must catch it (tests/engine/test_sglang.py). Written against SGLang 0.5.23."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


class SglangMutant(NamedTuple):
    name: str
    check: str  # the check that must fire
    bug: str
    patch: Callable[[Any], None]


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
    add = scheduler._add_request_to_queue

    def ignoring(req: Any, is_retracted: bool = False) -> None:
        req.sampling_params.ignore_eos = True
        add(req, is_retracted=is_retracted)

    scheduler._add_request_to_queue = ignoring


MUTANTS = (
    SglangMutant("double_free", "E3", "a request's released slots freed twice", double_free),
    SglangMutant("lock_kept", "E3", "a tree lock not released when a request ends", lock_kept),
    SglangMutant(
        "requeue_at_head", "E14", "a retracted request requeued at the head", requeue_at_head
    ),
    SglangMutant("hit_on_freed", "E3", "a cache hit on slots that were freed", hit_on_freed),
    SglangMutant("row_kept", "E3", "a request's row never given back", row_kept),
    SglangMutant("eos_ignored", "E7", "a request's eos ignored", eos_ignored),
)
