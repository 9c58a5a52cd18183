"""SGLang's KV pools read as plain values: pages, the radix tree over them, the requests'
rows (docs/engines.md, "SGLang"; read in SGLang 0.5.23).

A block of the trace is a KV page of SGLang's allocator (page 0 is its padding page, never
handed out: the trace's reserved block); a page's slots are `page * page_size + offset`.
A page is in one of three places, and the checks (E3) see whether it is in exactly one:

- free: the allocator's free pages (`get_all_free_pages()`, staged frees included);
- the radix tree: a node's slots hold the KV of the prefix its path from the root names;
  the page is evictable (the trace's `cached`) when the node's `lock_ref` is 0, held when
  requests lock it, `lock_ref` being its ref_count;
- private to a request: its row of `req_to_token` from `cache_protected_len` (the part the
  tree owns) to `kv_allocated_len`.

A request's block table is its row's pages up to `kv_allocated_len`: the tree pages it
locks, then its own. E3 then says: no page in two places, none lost, each page's lock count
equals the requests whose rows hold it, a page shared only at the same place of the same
prefix, every tree page at the place of the prefix its path names (E2 adds: holding that
prefix's KV).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

from schedcheck.engine.trace import PAUSED, Block, Pool

__all__ = ["PageMismatch", "Reader"]

FULL = 0  # ComponentType.FULL: a node's full-attention KV (0.5.23's enum index)


class PageMismatch(ValueError):
    """A row whose slots do not follow its pages (slot = page * page_size + offset)."""


class Reader:
    """Reads one scheduler's pools and requests; `names`: SGLang's request id -> ours."""

    def __init__(
        self, scheduler: Any, names: dict[str, str], sessions: frozenset[str] = frozenset()
    ) -> None:
        """`sessions`: the names of the requests that are streaming sessions (a session's
        id is its request's name)."""
        self.scheduler, self.names, self.sessions = scheduler, names, sessions
        self.page = int(scheduler.page_size)

    @staticmethod
    def held(req: Any) -> tuple[int, ...]:
        """The tokens a request holds: its prompt and the output appended so far."""
        return (*(int(t) for t in req.origin_input_ids), *(int(t) for t in req.output_ids))

    def tokens(self, req: Any, in_flight: list[int]) -> tuple[int, ...]:
        return (*self.held(req), *in_flight)

    def pages(self, row: tuple[int, ...], page: int) -> tuple[int, ...]:
        """The pages a row's slots lie in, one per page of positions; PageMismatch where a
        slot is not at its position's offset in its page, or a page's slots differ."""
        table = tuple(row[i] // page for i in range(0, len(row), page))
        for p, slot in enumerate(row):
            if slot != table[p // page] * page + p % page:
                raise PageMismatch(
                    f"position {p} is in slot {slot}, not in page {table[p // page]} at "
                    f"offset {p % page} (its row: {list(row)})"
                )
        return table

    def pool(self, done: set[str], seen: dict[str, Any], live: set[str] | None = None) -> Pool:
        """The pools now: `done` the requests told finished, `seen` our name -> Req (a
        session's latest turn), `live` the sessions with a turn sent and not ended. A
        request's tokens are those SGLang holds (its prompt and the output appended), not
        those in flight: what its retraction order reads (`len(req.output_ids)`), and all
        that the tree's pages name. A session holds the KV of its slot (the streaming
        session's record, `SessionSlot.kv`) between its turns, and while a turn of it
        waits (a new one, or one retracted: the slot keeps the row): PAUSED between turns,
        WAITING while a turn waits."""
        s, page = self.scheduler, self.page
        allocator = s.token_to_kv_pool_allocator
        count = int(allocator.size) // page + 1  # page 0 is padding
        refs = [0] * count
        hashes = [-1] * count
        prefixes: list[tuple[int, ...]] = [()] * count
        index: list[tuple[int, int]] = []
        evictable: list[int] = []
        for slots, prefix, locks in self.tree():
            for j in range(0, len(slots), page):
                p = len(prefix) - len(slots) + j
                b = slots[j] // page
                if not 0 < b < count:
                    continue  # outside the pool: E3 names it as no block at all
                number = zlib.crc32(",".join(map(str, prefix[: p + page])).encode()) & 0x7FFFFFFF
                hashes[b], prefixes[b] = number, prefix[: p + page]
                refs[b] += locks
                index.append((number, b))
                if not locks:
                    evictable.append(b)
        rows = s.req_to_token_pool.req_to_token
        tables: dict[str, tuple[int, ...]] = {}
        tokens: dict[str, tuple[int, ...]] = {}
        status: dict[str, str] = {}
        records = self.slots()
        for name in dict.fromkeys(self.names.values()):
            req = seen.get(name)
            if req is None:
                tables[name], tokens[name] = (), ()
                status[name] = "FINISHED" if name in done else "WAITING"
                continue
            tokens[name] = self.held(req)
            kv = req.kv
            row = kv.req_pool_idx
            finished = name in done or bool(req.finished())
            state = "RUNNING"
            if name in self.sessions and name not in done:
                if row is None and name in records:
                    kv, state = records[name], "WAITING"  # the slot's, not the turn's
                    row = kv.req_pool_idx
                if req.finished():
                    finished, state = False, "WAITING" if name in (live or ()) else PAUSED
            if row is None:
                tables[name] = ()
                status[name] = "FINISHED" if finished else "WAITING"
                continue
            status[name] = "FINISHED" if finished else state
            allocated, protected = int(kv.kv_allocated_len), int(kv.cache_protected_len)
            held = [int(x) for x in rows[row, :allocated].tolist()]
            tables[name] = tuple(dict.fromkeys(x // page for x in held))
            for b in dict.fromkeys(x // page for x in held[protected:]):
                if 0 <= b < count:
                    refs[b] += 1
        blocks = tuple(Block(refs[b], hashes[b], prefixes[b]) for b in range(count))
        return Pool(
            blocks,
            tuple(int(x) for x in _free_pages(allocator)),
            tuple(b for b in range(1, count) if refs[b] > 0),
            tables,
            tokens,
            status,
            tuple(sorted(evictable)),
            (0,),
            tuple(sorted(index)),
            tuple(self._running(s.running_batch.reqs)),
            tuple(self.names.get(str(r.rid), str(r.rid)) for r in s.waiting_queue),
        )

    def _running(self, reqs: Any) -> Iterator[str]:
        """The running batch's requests, by name; a session's turn ended there is not its
        session running (its next turn waits, or it waits for its client)."""
        for r in reqs:
            name = self.names.get(str(r.rid), str(r.rid))
            if not (name in self.sessions and r.finished()):
                yield name

    def rows_problem(self, seen: dict[str, Any]) -> str | None:
        """The request rows (`req_to_token`'s, 1 .. size; row 0 is padding): free
        (`free_slots`) or held by a request not finished, each exactly once; a row in
        neither is leaked (the check SGLang makes when idle, `_check_req_pool`, made after
        every step here); and a live row's committed KV never past what it was allocated
        (`kv_committed_len <= kv_allocated_len`, ReqKV's own rule)."""
        pool = self.scheduler.req_to_token_pool
        free = [int(r) for r in pool.free_slots]
        held = {
            int(req.kv.req_pool_idx): name
            for name, req in seen.items()
            if req.kv.req_pool_idx is not None and not req.finished()
        }
        kvs = {name: req.kv for name, req in seen.items()}
        for name, kv in self.slots().items():  # a session's row, between turns too
            held.setdefault(int(kv.req_pool_idx), name)
            kvs[name] = kv
        rows = set(range(1, int(pool.size) + 1))
        twice = sorted(r for r in set(free) if free.count(r) > 1)
        if twice:
            return f"row {twice[0]} of req_to_token is free twice (freed twice?)"
        both = sorted(set(free) & set(held))
        if both:
            return f"row {both[0]} is free, but {held[both[0]]} holds it"
        lost = sorted(rows - set(free) - set(held))
        if lost:
            return (
                f"row {lost[0]} of req_to_token is neither free nor held by a running "
                "request: leaked"
            )
        for name in held.values():  # SGLang's own rule: committed <= allocated (ReqKV)
            kv = kvs[name]
            committed = getattr(kv, "kv_committed_len", None)
            if committed is not None and int(committed) > int(kv.kv_allocated_len):
                return (
                    f"{name} has KV committed to position {int(committed)}, past the "
                    f"{int(kv.kv_allocated_len)} slots its row was allocated"
                )
        return None

    def slots(self) -> dict[str, Any]:
        """The KV records the streaming sessions hold a row with, by session id (the tree
        cache's `StreamingSession.slots`): a session's between its turns, and the one its
        turn in flight borrows. (None without sessions.)"""
        if not self.sessions:
            return {}
        session = getattr(self.scheduler.tree_cache, "session", None)
        return {
            str(sid): slot.kv
            for sid, slot in getattr(session, "slots", {}).items()
            if slot.kv.req_pool_idx is not None
        }

    def tree(self) -> Iterator[tuple[list[int], tuple[int, ...], int]]:
        """Each node of the radix tree holding KV on the device: its slots, the prefix its
        path names (through its own tokens), its lock count (the tree's Python core). A
        node's own tokens are its key's first len(key): with EAGLE the tree is keyed by
        bigrams (`RadixKey.is_bigram`: a slot's token and the next), and a node's raw
        tokens end with the boundary token its child's begin with."""
        core = self.scheduler.tree_cache.tree_core
        stack: list[tuple[Any, tuple[int, ...]]] = [(core.root_node, ())]
        while stack:
            node, prefix = stack.pop()
            for child in node.children.values():
                key = tuple(int(t) for t in child.key.token_ids[: len(child.key)])
                stack.append((child, (*prefix, *key)))
                data = child.component_data[FULL]
                if data.value is not None:
                    yield [int(x) for x in data.value.tolist()], (*prefix, *key), int(data.lock_ref)


def _free_pages(allocator: Any) -> list[int]:
    """The allocator's free pages, its staged frees included: `get_all_free_pages()`, or
    before it (0.5.19) `free_pages` and `release_pages`."""
    if hasattr(allocator, "get_all_free_pages"):
        return [int(x) for x in allocator.get_all_free_pages().tolist()]
    return [int(x) for x in (*allocator.free_pages.tolist(), *allocator.release_pages.tolist())]
