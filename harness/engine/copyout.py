"""Plain values copied out of an engine's objects, as nano-vllm names them: what the model
runner reads of a scheduled sequence, what its pickled copy holds, the block pool, the
outputs. Everything becomes int, str and tuples here, so nothing of the engine's leaves
the worker."""

from __future__ import annotations

import pickle
from typing import Any

from invariants.engine.trace import Block, Copy, Pool, Scheduled
from invariants.engine.workload import EngineWorkload


def scheduled(seq: Any, name: str, generation: str, is_prefill: bool) -> Scheduled:
    """Where the runner starts computing `seq` this step and how many tokens."""
    tokens = tuple(int(t) for t in seq.token_ids)
    cached = int(seq.num_cached_tokens)
    if generation == "chunked":
        start, n = cached, int(seq.num_scheduled_tokens)
    elif is_prefill:
        start, n = cached, len(tokens) - cached
    else:
        start, n = len(tokens) - 1, 1  # this generation leaves num_cached_tokens alone
    return Scheduled(name, start, n, tokens, tuple(int(b) for b in seq.block_table))


def pickled(seq: Any, generation: str) -> Copy:
    """What a tensor-parallel worker would receive: `seq` through pickle and back."""
    clone = pickle.loads(pickle.dumps(seq))

    def field(name: str) -> Any:
        try:
            return getattr(clone, name)
        except Exception:
            return None  # a decode's copy has no token_ids, say

    tokens, table, last = field("token_ids"), field("block_table"), field("last_token")
    cached, n = field("num_cached_tokens"), field("num_scheduled_tokens")
    return Copy(
        None if tokens is None else tuple(int(t) for t in tokens),
        None if last is None else int(last),
        None if cached is None or generation != "chunked" else int(cached),
        None if n is None else int(n),
        None if table is None else tuple(int(b) for b in table),
    )


def pool(manager: Any, seqs: dict[str, Any]) -> Pool:
    """The block manager's blocks, free list and used set; every sequence's table."""
    blocks = tuple(
        Block(int(b.ref_count), int(b.hash), tuple(int(t) for t in b.token_ids))
        for b in manager.blocks
    )
    return Pool(
        blocks,
        tuple(int(b) for b in manager.free_block_ids),
        tuple(sorted(int(b) for b in manager.used_block_ids)),
        {n: tuple(int(b) for b in s.block_table) for n, s in seqs.items()},
        {n: tuple(int(t) for t in s.token_ids) for n, s in seqs.items()},
        {n: status(s) for n, s in seqs.items()},
    )


def status(seq: Any) -> str:
    return str(getattr(seq.status, "name", seq.status))


def outputs(seqs: dict[str, Any], workload: EngineWorkload) -> dict[str, tuple[int, ...]]:
    prompts = {r.name: len(r.prompt) for r in workload.requests}
    return {n: tuple(int(t) for t in s.token_ids[prompts[n] :]) for n, s in seqs.items()}
