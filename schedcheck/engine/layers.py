"""The kinds of layer a hybrid model has beside full attention (issue 51), and what each
reads: a KV cache group of its own in an engine that keeps one per kind (vLLM's hybrid KV
cache manager), scaled down so that windows, chunks and blocks all matter in a few tokens.

- "window:W": sliding-window attention; the query at position p reads the keys of
  positions max(0, p - W + 1) .. p, W of them with its own (gpt-oss, Gemma; vLLM's
  SlidingWindowSpec, FlashAttention's window (W - 1, 0));
- "chunk:C": chunked local attention; the query at p reads its chunk's positions
  (p // C) * C .. p (Llama 4; vLLM's ChunkedLocalAttentionSpec);
- "mamba": a state-space layer (Mamba, linear attention: Qwen3-Next, Nemotron-H, Jamba);
  no KV per position but one state, a function of the whole prefix, kept at block
  boundaries so a prefix can be cached (vLLM's MambaSpec in its "align" mode, the one its
  prefix caching runs): a step computing positions c .. c+n-1 starts from the state of
  the first c tokens (none at c = 0), read from the block at index `state_index(c)` of
  its group's table, and leaves the state of the first c+n tokens at `state_index(c+n)`;
  a block the prefix cache indexes as the prefix [0, (j+1)*B) holds that prefix's state.

A model's full-attention layer reads every position 0 .. p. A layer of one kind writes the
KV of every position it computes into its own group's blocks; the blocks of positions it
will never read again are the engine's to free (vLLM puts its null block in their place).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KINDS", "STATE_KINDS", "Layer", "state_index"]

KINDS = ("window", "chunk", "mamba")
STATE_KINDS = ("mamba",)  # kinds that keep a state, not KV per position


@dataclass(frozen=True)
class Layer:
    """One kind of layer beside full attention, with its size in tokens (W or C; 0 for a
    state's kind, which has none)."""

    kind: str
    size: int

    @classmethod
    def parse(cls, text: str) -> Layer:
        """ "window:4", "chunk:4" or "mamba"; ValueError naming what is wrong."""
        kind, colon, size = str(text).partition(":")
        if kind not in KINDS:
            raise ValueError(f"layer {text!r}: kind {kind!r} is not one of {', '.join(KINDS)}")
        if kind in STATE_KINDS:
            if colon:
                raise ValueError(f"layer {text!r}: a {kind} layer has no size (write {kind!r})")
            return cls(kind, 0)
        if not size.isdigit() or int(size) < 1:
            raise ValueError(
                f"layer {text!r}: its size {size!r} is not a whole number of tokens >= 1"
            )
        return cls(kind, int(size))

    def __str__(self) -> str:
        return self.kind if self.state else f"{self.kind}:{self.size}"

    @property
    def state(self) -> bool:
        """Whether it keeps a state of the whole prefix (no KV per position)."""
        return self.kind in STATE_KINDS

    def reads(self, p: int) -> range:
        """The positions whose KV the query at position `p` reads (its own included; a
        state's kind reads none: its state, state_index)."""
        if self.state:
            return range(p + 1, p + 1)
        if self.kind == "window":
            return range(max(0, p - self.size + 1), p + 1)
        return range(p // self.size * self.size, p + 1)


def state_index(tokens: int, block_size: int) -> int:
    """The index in a state layer's block table of the block holding the state of the first
    `tokens` tokens: the block of its last position, cdiv(tokens, B) - 1 (vLLM's align
    mode: the runner's `mamba_state_idx`, the kernels' `(seq_len - 1) // B`)."""
    return -(-tokens // block_size) - 1
