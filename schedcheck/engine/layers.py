"""The kinds of layer a hybrid model has beside full attention (issue 51), and what each
reads: a KV cache group of its own in an engine that keeps one per kind (vLLM's hybrid KV
cache manager), scaled down so that windows, chunks and blocks all matter in a few tokens.

- "window:W": sliding-window attention; the query at position p reads the keys of
  positions max(0, p - W + 1) .. p, W of them with its own (gpt-oss, Gemma; vLLM's
  SlidingWindowSpec, FlashAttention's window (W - 1, 0));
- "chunk:C": chunked local attention; the query at p reads its chunk's positions
  (p // C) * C .. p (Llama 4; vLLM's ChunkedLocalAttentionSpec).

A model's full-attention layer reads every position 0 .. p. A layer of one kind writes the
KV of every position it computes into its own group's blocks; the blocks of positions it
will never read again are the engine's to free (vLLM puts its null block in their place).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KINDS", "Layer"]

KINDS = ("window", "chunk")


@dataclass(frozen=True)
class Layer:
    """One kind of layer beside full attention, with its size in tokens (W or C)."""

    kind: str
    size: int

    @classmethod
    def parse(cls, text: str) -> Layer:
        """ "window:4" or "chunk:4"; ValueError naming what is wrong."""
        kind, _, size = str(text).partition(":")
        if kind not in KINDS:
            raise ValueError(f"layer {text!r}: kind {kind!r} is not one of {', '.join(KINDS)}")
        if not size.isdigit() or int(size) < 1:
            raise ValueError(
                f"layer {text!r}: its size {size!r} is not a whole number of tokens >= 1"
            )
        return cls(kind, int(size))

    def __str__(self) -> str:
        return f"{self.kind}:{self.size}"

    def reads(self, p: int) -> range:
        """The positions whose KV the query at position `p` reads (its own included)."""
        if self.kind == "window":
            return range(max(0, p - self.size + 1), p + 1)
        return range(p // self.size * self.size, p + 1)

    def first_read(self, end: int) -> int:
        """The first position a step computing up to position `end - 1` reads: every block
        wholly before it may be freed by then."""
        return self.reads(max(end - 1, 0)).start
