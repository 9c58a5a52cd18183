"""Plain values copied out of an engine's objects, as nano-vllm names them: what the model
runner reads of a scheduled sequence, what its pickled copy holds, the block pool, the
outputs. Everything becomes int, str and tuples here, so nothing of the engine's leaves
the worker."""

from __future__ import annotations

import pickle
from typing import Any

from invariants.engine.runner import Runner
from invariants.engine.trace import Block, Copy, Pool, Scheduled
from invariants.engine.workload import EngineWorkload


def scheduled(seq: Any, name: str, runner: Runner, is_prefill: bool) -> Scheduled:
    """Which positions the runner computes for `seq` this step (invariants/engine/runner.py):
    a prefill as the engine's runner reads it, a decode always its last position."""
    tokens = tuple(int(t) for t in seq.token_ids)
    if is_prefill:
        n = int(seq.num_scheduled_tokens) if runner.scheduled else 0
        start, n = runner.prefill(int(seq.num_cached_tokens), n, len(tokens))
    else:
        start, n = len(tokens) - 1, 1
    return Scheduled(name, start, n, tokens, tuple(int(b) for b in seq.block_table))


def pickled(seq: Any) -> Copy:
    """What a tensor-parallel worker would receive: `seq` through pickle and back."""
    clone = pickle.loads(pickle.dumps(seq))

    def field(name: str) -> Any:
        try:
            return getattr(clone, name)
        except Exception:
            return None  # a field its __getstate__ does not send

    def number(name: str) -> int | None:
        value = field(name)
        return None if value is None else int(value)

    tokens, table = field("token_ids"), field("block_table")
    return Copy(
        None if tokens is None else tuple(int(t) for t in tokens),
        number("last_token"),
        number("num_cached_tokens"),
        number("num_scheduled_tokens"),
        None if table is None else tuple(int(b) for b in table),
        number("num_tokens"),
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
