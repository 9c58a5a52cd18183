"""The model runner an engine is checked with: which positions a step computes for a
scheduled sequence, and which of its fields a tensor-parallel worker reads.

Each rule is nano-vllm's own `nanovllm/engine/model_runner.py` of one generation
(docs/engines.md, "The model runner"), read off its `prepare_prefill` and `prepare_decode`:

- a prefill computes positions `start .. start + n - 1`, writing their KV into
  `block_table[p // block_size]` at offset `p % block_size`, reading the sequence's tokens
  there (`seq[start:end]`, so `token_ids` of a tensor-parallel copy);
- a decode computes position `len(seq) - 1` from `last_token`, writing its KV into the
  *last* block of the table (`block_table[-1]`), in every generation.

Attention reads positions `0 .. end - 1` through the block table (a runner that reads past
the chunk, as 8d63a98's `seqlen_k = seqlen` did, is the runner's own bug, not checked here).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Runner:
    name: str
    clamp: bool  # prefill starts at min(num_cached_tokens, len(seq) - 1), not num_cached_tokens
    scheduled: bool  # prefill computes num_scheduled_tokens, not everything up to the end
    source: str  # the nano-vllm commits whose model_runner.py this is

    def describe(self) -> str:
        start = "min(num_cached_tokens, len(seq)-1)" if self.clamp else "num_cached_tokens"
        count = "num_scheduled_tokens" if self.scheduled else "every token to the end"
        return (f"prefill computes {count} from {start} (tokens from token_ids); decode "
                f"computes position len(seq)-1 from last_token, into block_table[-1]")  # fmt: skip

    def prefill(self, num_cached: int, num_scheduled: int, num_tokens: int) -> tuple[int, int]:
        """(first position, count) a prefill step computes."""
        start = min(num_cached, num_tokens - 1) if self.clamp else num_cached
        count = num_scheduled if self.scheduled else num_tokens - start
        return start, count


RUNNERS = {
    r.name: r
    for r in (
        Runner("chunked", False, True, "f64d821 to bb823b3 (April 2026 on)"),
        Runner("chunked-clamped", True, True, "8d63a98 to 25794a1 (the first chunked commits)"),
        Runner("whole", False, False, "before 8d63a98 (9e8507e and earlier)"),
    )
}
