"""E3, block accounting: after every schedule() and postprocess(), the pool adds up.

Free and used partition all blocks (no block in both, none lost, none twice in the free
list); where the engine keeps freed-but-cached blocks apart from the free list (a third,
evictable state: some forks' LRU prefix cache), free, cached and used partition them, and a
cached block holds a hash (it is there to be found by one); a block is used exactly when
its ref_count is positive; each block's ref_count
equals the number of block tables holding it; no block appears twice in one table; a
block shared by several sequences sits at the same index of each table, over the same
tokens (a shared block is a cached prefix: it must be the same prefix for all holders).

A pool may have two more parts: reserved blocks (vLLM's null block, block 0), in no state
and no table; and, where hashes name whole prefixes (prefix_problem), an index of its prefix
cache, where a block stays findable by its
hash while it waits in the free queue: every entry finds a block holding that hash, every
hashed block is in the index, and a table that holds a hashed block holds it at the place
of the prefix the hash names, over those very tokens.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from schedcheck.engine.trace import EngineTrace, Pool
from schedcheck.invariants.violation import Violation


def check_e3(trace: EngineTrace) -> Iterator[Violation]:
    bs = trace.workload.config.block_size
    hashes_name_prefixes = trace.traits.hashes_name_prefixes
    for step in trace.steps:
        for call, pool in (
            ("schedule()", step.after_schedule),
            (trace.traits.update_call, step.after_postprocess),
        ):
            if pool is None:
                continue
            problem = pool_problem(pool, bs)
            if problem is None and hashes_name_prefixes:
                problem = prefix_problem(pool, bs)
            if problem is not None:
                message, names = problem
                yield Violation("E3", step.step, call, message, names)
                return  # the pool is broken from here on: one report


def pool_problem(pool: Pool, bs: int) -> tuple[str, tuple[str, ...]] | None:
    reserved = set(pool.reserved)
    everything = set(range(len(pool.blocks))) - reserved
    free, used, cached = set(pool.free), set(pool.used), set(pool.cached)
    for b in sorted(reserved & (free | used | cached)):
        state = "free" if b in free else "used" if b in used else "cached"
        return f"block {b} is reserved (vLLM's null block), but {state}", ()
    if len(free) != len(pool.free):
        twice = [b for b, n in Counter(pool.free).items() if n > 1]
        return f"block {twice[0]} is in the free list twice (freed twice?)", ()
    if len(cached) != len(pool.cached):
        twice = [b for b, n in Counter(pool.cached).items() if n > 1]
        return f"block {twice[0]} is cached twice (under two hashes?)", ()
    for (one, x), (two, y) in (
        ((free, "free"), (used, "used")),
        ((cached, "cached"), (used, "used")),
        ((free, "free"), (cached, "cached")),
    ):
        if one & two:
            return f"block {min(one & two)} is both {x} and {y}", ()
    if free | used | cached != everything:
        lost = sorted(everything - free - used - cached) or sorted(
            (free | used | cached) - everything
        )
        state = "free, cached nor used" if pool.cached else "free nor used"
        return f"block {lost[0]} is neither {state} (or is no block at all)", ()
    for b in sorted(cached):
        if pool.blocks[b].hash == -1:
            return f"block {b} is kept as cached, but holds no hash", ()
    holders: dict[int, list[tuple[str, int]]] = {}
    for b in pool.deferred:  # a step in flight may still write it: the engine holds it
        holders.setdefault(b, []).append(("a step in flight", -1))
    for name, table in pool.tables.items():
        for index, b in enumerate(table):
            if any(h == name for h, _ in holders.get(b, [])):
                return f"{name}'s block table holds block {b} twice: {list(table)}", (name,)
            holders.setdefault(b, []).append((name, index))
    group_of = {b: 0 for b in holders}  # the KV cache group whose tables hold each block
    for name, others in pool.groups.items():  # a hybrid model's other groups (issue 51)
        for g, table in enumerate(others, start=1):
            mine: set[int] = set()
            for index, b in enumerate(table):
                if b in reserved:
                    continue  # the null block where the group freed what it no longer reads
                if b in mine:
                    return (
                        f"{name}'s group {g} block table holds block {b} twice: {list(table)}",
                        (name,),
                    )
                if group_of.setdefault(b, g) != g:
                    return (
                        f"block {b} is held by KV cache groups {group_of[b]} and {g} at once "
                        f"({name}'s group {g} block table {list(table)}): one pool, one owner",
                        (name,),
                    )
                mine.add(b)
                holders.setdefault(b, []).append((name, index))
    for b, block in enumerate(pool.blocks):
        held = holders.get(b, [])
        if b in reserved:
            if held:
                names = tuple(n for n, _ in held)
                return f"block {b} is reserved (vLLM's null block), but {names[0]} holds it", names
            continue  # its ref_count is not kept
        if block.ref_count != len(held):
            names = tuple(n for n, _ in held)
            who = ", ".join(names) or "no sequence"
            return (
                f"block {b} has ref_count {block.ref_count}, but {len(held)} block "
                f"table(s) hold it ({who})",
                names,
            )
        if (block.ref_count > 0) != (b in used):
            state = "used" if b in used else "cached" if b in cached else "free"
            return f"block {b} has ref_count {block.ref_count} but is {state}", ()
        tables = [(n, i) for n, i in held if i >= 0]  # a step in flight holds no position
        if len(tables) > 1:
            mismatch = _different_prefixes(pool, tables, bs)
            if mismatch is not None:
                return f"block {b} is shared by {mismatch}", tuple(n for n, _ in held)
    return None


def _different_prefixes(pool: Pool, held: list[tuple[str, int]], bs: int) -> str | None:
    indices = {i for _, i in held}
    if len(indices) > 1:
        return "sequences that hold it at different positions: " + ", ".join(
            f"{n} as block {i}" for n, i in held
        )
    (i,) = indices
    prefixes = {pool.tokens[n][: (i + 1) * bs] for n, _ in held}
    if len(prefixes) > 1:
        return "sequences with different prefixes: " + ", ".join(
            f"{n} {list(pool.tokens[n][: (i + 1) * bs])}" for n, _ in held
        )
    return None


def prefix_problem(pool: Pool, bs: int) -> tuple[str, tuple[str, ...]] | None:
    """vLLM's prefix cache index against its blocks and tables (a block's token_ids are the
    prefix its hash names)."""
    indexed = set(pool.cache_index)
    for number, b in pool.cache_index:
        if not 0 <= b < len(pool.blocks) or pool.blocks[b].hash != number:
            held = "no block" if not 0 <= b < len(pool.blocks) else _hash(pool.blocks[b].hash)
            return f"the prefix cache finds block {b} under hash #{number}, but it holds {held}", ()
    for b, block in enumerate(pool.blocks):
        if block.hash != -1 and b not in pool.reserved and (block.hash, b) not in indexed:
            return (
                f"block {b} holds hash #{block.hash} (the prefix {list(block.token_ids)}), but "
                "the prefix cache does not index it",
                (),
            )
    for name, table in pool.tables.items():
        for i, b in enumerate(table):
            if not 0 <= b < len(pool.blocks) or pool.blocks[b].hash == -1:
                continue
            prefix = pool.blocks[b].token_ids
            own = pool.tokens[name][: (i + 1) * bs]
            if prefix != own:
                return (
                    f"{name} holds block {b} as its block {i}, over its tokens {list(own)}, "
                    f"but the block's hash #{pool.blocks[b].hash} names the prefix "
                    f"{list(prefix)}",
                    (name,),
                )
    return None


def _hash(number: int) -> str:
    return "no hash" if number == -1 else f"hash #{number}"
