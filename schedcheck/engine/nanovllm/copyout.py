"""Plain values copied out of an engine's objects, as nano-vllm names them: what the model
runner reads of a scheduled sequence, what its pickled copy holds, the block pool, the
outputs. Everything becomes int, str and tuples here, so nothing of the engine's leaves
the worker."""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Mapping
from typing import Any

from schedcheck.engine.runner import Runner
from schedcheck.engine.trace import Block, Copy, Pool, Scheduled
from schedcheck.engine.workload import EngineWorkload


def scheduled(seq: Any, name: str, runner: Runner, is_prefill: bool) -> Scheduled:
    """Which positions the runner computes for `seq` this step (engine/runner.py; the
    profiles in runners.py): a prefill as the engine's runner reads it, a decode always its
    last position."""
    tokens = tuple(int(t) for t in seq.token_ids)
    if runner.by_prefill_rule(is_prefill):
        first, span = runner.fields
        start, n = runner.prefill(
            int(getattr(seq, first)), _number(getattr(seq, span)) if span else None, len(tokens)
        )
    else:
        start, n = len(tokens) - 1, 1
    return Scheduled(name, start, n, tokens, tuple(int(b) for b in seq.block_table))


def pickled(seq: Any, runner: Runner) -> Copy:
    """What a tensor-parallel worker would receive: `seq` through pickle and back (of the
    runner's two fields, under Copy's names num_cached and num_scheduled)."""
    clone = pickle.loads(pickle.dumps(seq))

    def field(name: str) -> Any:
        try:
            return getattr(clone, name)
        except Exception:
            return None  # a field its __getstate__ does not send

    def number(name: str) -> int | None:
        return _number(field(name)) if name else None

    tokens, table = field("token_ids"), field("block_table")
    return Copy(
        None if tokens is None else tuple(int(t) for t in tokens),
        number("last_token"),
        number(runner.fields[0]),
        number(runner.fields[1]),
        None if table is None else tuple(int(b) for b in table),
        number("num_tokens"),
    )


# A third state some forks give blocks: freed but still cached, evictable, kept apart from
# the free list (shunwendongan/nano-vllm-online-serving's set, tang-jiapeng/nano-vllm-v1's
# OrderedDict from hash to block id). nano-vllm itself keeps such blocks in the free list.
CACHED = ("cached_block_ids", "cached_blocks", "evictable_block_ids")


def pool(manager: Any, seqs: dict[str, Any]) -> Pool:
    """The block manager's blocks, free list, used set and evictable cached blocks (where it
    keeps them apart); every sequence's table."""
    # map(int, ...): copied twice a step, the cheapest way to plain ints
    blocks = tuple(
        Block(
            int(b.ref_count),
            -1 if b.hash is None else int(b.hash),
            tuple(map(int, b.token_ids or ())),
        )
        for b in manager.blocks
    )
    return Pool(
        blocks,
        tuple(map(int, manager.free_block_ids)),
        tuple(sorted(map(int, manager.used_block_ids))),
        {n: tuple(map(int, s.block_table)) for n, s in seqs.items()},
        {n: tuple(map(int, s.token_ids)) for n, s in seqs.items()},
        {n: status(s) for n, s in seqs.items()},
        cached(manager),
    )


def cached(manager: Any) -> tuple[int, ...]:
    """The block ids of a third container (CACHED): a set or an ordered set of them, or a
    map from hash to block id."""
    for name in CACHED:
        container = getattr(manager, name, None)
        if container is not None:
            ids = list(container)
            if isinstance(container, Mapping) and all(
                isinstance(v, int) for v in container.values()
            ):
                ids = list(container.values())  # from hash to block id
            return tuple(sorted(int(b) for b in ids))
    return ()


def _number(value: Any) -> int | None:
    return None if value is None else int(value)


def status(seq: Any) -> str:
    value = seq.status
    key = (type(value), value)  # an IntEnum's member equals another class's of its value
    try:
        return _STATUS[key]
    except (KeyError, TypeError):  # Enum's .name is a descriptor, slow twice a step
        name = str(getattr(value, "name", value))
        with contextlib.suppress(TypeError):
            _STATUS[key] = name
        return name


_STATUS: dict[tuple[type, Any], str] = {}


def outputs(seqs: dict[str, Any], workload: EngineWorkload) -> dict[str, tuple[int, ...]]:
    prompts = {r.name: len(r.prompt) for r in workload.requests}
    return {n: tuple(int(t) for t in s.token_ids[prompts[n] :]) for n, s in seqs.items()}


def unreadable(error: Exception) -> str:
    """Why the engine's state could not be read as nano-vllm's, in words (a field it lacks,
    or holds as something else): no verdict on the engine, exit 2 naming it."""
    if isinstance(error, AttributeError):
        obj = getattr(error, "obj", None)
        owner = type(obj).__name__ if obj is not None else "an object"
        return (
            f"{owner} has no attribute {error.name!r}, which schedcheck reads as "
            f'nano-vllm\'s (docs/engines.md, "Checking a fork"): {error}'
        )
    return (
        f"its state could not be read as nano-vllm's: {error!r} (docs/engines.md, "
        '"Checking a fork")'
    )
