"""Short builders that keep the tests readable, in the style of vLLM's test utils."""

from __future__ import annotations

from types import ModuleType
from typing import Any


def spec_sample_fn(seq: Any) -> int:
    """The worked examples' model: `100 * i + len(seq.output)` for sequence `a<i>`."""
    return 100 * int(seq.seq_id[1:]) + len(seq.output)


def create_scheduler(impl: ModuleType, **overrides: Any) -> Any:
    """A scheduler of `impl` with roomy defaults; keyword arguments override them."""
    kwargs: dict[str, Any] = dict(
        num_blocks=100,
        block_size=4,
        max_num_seqs=8,
        max_num_batched_tokens=64,
        sample_fn=spec_sample_fn,
    )
    kwargs.update(overrides)
    return impl.Scheduler(**kwargs)


def create_requests(impl: ModuleType, sched: Any, *specs: tuple[str, int, int]) -> dict[str, Any]:
    """Add `(seq_id, prompt_len, max_tokens)` requests in order; return them by id."""
    seqs = {}
    for seq_id, prompt_len, max_tokens in specs:
        seq = impl.Sequence(seq_id=seq_id, prompt_len=prompt_len, max_tokens=max_tokens)
        sched.add(seq)
        seqs[seq_id] = seq
    return seqs


def ids(seqs: Any) -> list[str]:
    """The seq_ids of a queue or of what update() returned, in order."""
    return [seq.seq_id for seq in seqs]
