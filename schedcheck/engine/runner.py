"""The model runner an engine is checked with, as data its adapter declares: which positions
a step computes for a scheduled sequence, and which of its fields a tensor-parallel worker
reads.

Each rule is one model runner's `prepare_prefill` / `prepare_decode` (or a fork's single
`prepare_model_input`), read off its code (docs/engines.md, "The model runner"):

- a prefill computes positions `start .. start + n - 1`, where `start` and `n` come from
  two of the sequence's fields (`num_cached_tokens` and `num_scheduled_tokens` in nano-vllm
  today); it writes their KV into `block_table[p // block_size]` at offset
  `p % block_size` and reads the sequence's tokens there (`seq[start:end]`, so `token_ids`
  of a tensor-parallel copy);
- a decode computes position `len(seq) - 1` from `last_token`; nano-vllm writes its KV
  into the *last* block of the table (`block_table[-1]`) in every generation, some forks
  into `block_table[p // block_size]`; forks in vLLM v1's style have no decode step of
  their own: every scheduled sequence, decode or not, is computed by the prefill rule, in
  one mixed batch.

Attention reads positions `0 .. end - 1` through the block table (a runner that reads past
the chunk, as 8d63a98's `seqlen_k = seqlen` did, is the runner's own bug, not checked here).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Span = Literal["count", "end", "rest"]  # the second field is a count, an end, or unused
Decode = Literal["last-block", "position", "mixed"]


@dataclass(frozen=True)
class Runner:
    name: str
    start: str  # the Sequence field a prefill starts at
    span: Span
    span_field: str  # the field giving the count or the end ("" for "rest")
    clamp: bool  # the start is min(start, len(seq) - 1)
    decode: Decode
    source: str  # the model runner this rule was read from

    def describe(self) -> str:
        start = f"min({self.start}, len(seq)-1)" if self.clamp else self.start
        count = {
            "count": f"{self.span_field} tokens",
            "rest": "every token to the end",
            "end": f"up to {self.span_field} (or to the end)",
        }[self.span]
        decode = {
            "last-block": "decode computes position len(seq)-1 from last_token, into "
            "block_table[-1]",
            "position": "decode computes position len(seq)-1 from last_token, into "
            "block_table[p // block_size]",
            "mixed": "no decode step of its own: every scheduled sequence is computed by "
            "the same rule, in one mixed batch",
        }[self.decode]
        return f"prefill computes {count} from {start} (tokens from token_ids); {decode}"

    @property
    def fields(self) -> tuple[str, str]:
        """The two Sequence fields it reads: where a prefill starts, and its span."""
        return self.start, self.span_field

    def prefill(self, start: int, span: int | None, num_tokens: int) -> tuple[int, int]:
        """(first position, count) a prefill computes, from the two fields' values."""
        first = min(start, num_tokens - 1) if self.clamp else start
        if self.span == "count":
            return first, span or 0
        if self.span == "end":
            return first, (span or num_tokens) - first
        return first, num_tokens - first

    def prefill_read(
        self, start: int | None, span: int | None, num_tokens: int
    ) -> tuple[int, int] | None:
        """(first position, count) a prefill computes from the two fields as a copy of the
        sequence carries them; None where it lacks one the runner reads."""
        if start is None or (self.span == "count" and span is None):
            return None
        return self.prefill(start, span, num_tokens)

    def by_prefill_rule(self, is_prefill: bool) -> bool:
        """Whether a sequence of a step is computed by the prefill rule."""
        return is_prefill or self.decode == "mixed"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Runner:
        span, decode = str(data["span"]), str(data["decode"])
        if span not in ("count", "end", "rest") or decode not in (
            "last-block",
            "position",
            "mixed",
        ):
            raise ValueError(f"not a model runner's rules: span {span!r}, decode {decode!r}")
        return cls(
            str(data["name"]),
            str(data["start"]),
            span,  # type: ignore[arg-type]
            str(data["span_field"]),
            bool(data["clamp"]),
            decode,  # type: ignore[arg-type]
            str(data["source"]),
        )
