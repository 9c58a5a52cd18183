"""The token model: a pure, seeded stand-in for the LLM behind `sample_fn`.

The next token is a function of (seed, seq_id, every token generated so far), so a lost,
extra or reordered token changes everything after it: that is what makes D1 (output with
preemption == output without) sensitive. It can emit eos at any position, the first
included, and eos_token_id 0 is as good as any other.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

_MASK = (1 << 64) - 1


def _mix(h: int, x: int) -> int:
    """One round of a splitmix64-style mixer: cheap, deterministic across processes."""
    h = (h ^ (x & _MASK)) * 0x9E3779B97F4A7C15 & _MASK
    h ^= h >> 31
    h = h * 0xBF58476D1CE4E5B9 & _MASK
    return h ^ (h >> 29)


# Per (seed, key): the last history mixed and its hash (TokenModel._chain); a cache only.
_LAST: dict[tuple[int, int], tuple[tuple[int, ...], int]] = {}
_LAST_SIZE = 4096
# Per `keys` tuple longer than _SCANNED (by identity; the tuple kept alive here): its dict.
_KEYS: dict[int, tuple[tuple[tuple[str, int], ...], dict[str, int]]] = {}
_KEYS_SIZE = 64
_SCANNED = 16


@dataclass(frozen=True)
class TokenModel:
    """Which token a sequence samples next.

    - `seed`: changes every token of every sequence.
    - `vocab_size`: ordinary tokens are drawn from [0, vocab_size], skipping eos.
    - `eos_per_mille`: the chance, in thousandths, that a position yields eos.
    - `eos_at`: (seq_id, position) pairs where eos comes for sure (position 0 = first token).
    - `keys`: (seq_id, key) pairs: a request's own stream of tokens, by a key drawn with it,
      so that renaming or deleting another request leaves its tokens as they were (which
      lets a counterexample shrink); a request without one keys by the crc32 of its name.
    - `spec`: instead, the spec's worked examples' model, `100 * i + len(output)` for a
      sequence named `a<i>` (or `s<i>`); it never says eos.
    Without an eos_token_id no token is eos, whatever these say.
    """

    seed: int = 0
    vocab_size: int = 100
    eos_per_mille: int = 0
    eos_at: tuple[tuple[str, int], ...] = ()
    keys: tuple[tuple[str, int], ...] = ()
    spec: bool = False

    def __post_init__(self) -> None:
        if self.vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {self.vocab_size!r}")
        if not 0 <= self.eos_per_mille <= 1000:
            raise ValueError(f"eos_per_mille must be in [0, 1000], got {self.eos_per_mille!r}")

    def next_token(self, seq_id: str, history: tuple[int, ...], eos_token_id: int | None) -> int:
        """The token sampled after `history`, the sequence's output so far."""
        position = len(history)
        if self.spec:
            return 100 * int(seq_id[1:]) + position
        if eos_token_id is not None and (seq_id, position) in self.eos_at:
            return eos_token_id
        h = _mix(self._chain(seq_id, history), position)
        if eos_token_id is not None and (h >> 32) % 1000 < self.eos_per_mille:
            return eos_token_id
        token = h % self.vocab_size
        return self.vocab_size if token == eos_token_id else token

    def generate(self, seq_id: str, max_tokens: int, eos_token_id: int | None) -> tuple[int, ...]:
        """The whole output with no scheduler at all: until eos or max_tokens (D1)."""
        output: list[int] = []
        while len(output) < max_tokens:
            token = self.next_token(seq_id, tuple(output), eos_token_id)
            output.append(token)
            if token == eos_token_id:
                break
        return tuple(output)

    def _chain(self, seq_id: str, history: tuple[int, ...]) -> int:
        """The seed, the sequence's key and its history mixed in order. A run asks for each
        sequence's history one token longer than the last time: that is one mix, not one
        per token so far (outputs of hundreds of tokens, the larger stage's, would cost the
        square)."""
        start = (self.seed, self._key(seq_id))
        last = _LAST.get(start)
        if last is not None and history[:-1] == last[0]:
            h = _mix(last[1], history[-1]) if history else last[1]
        elif last is not None and history == last[0]:
            h = last[1]
        else:
            h = _mix(*start)
            for token in history:
                h = _mix(h, token)
        if len(_LAST) > _LAST_SIZE:
            _LAST.clear()
        _LAST[start] = (history, h)
        return h

    def _key(self, seq_id: str) -> int:
        keys = self.keys
        if len(keys) <= _SCANNED:  # a handful of requests: a scan beats building a dict
            for name, key in keys:
                if name == seq_id:
                    return key
            return zlib.crc32(seq_id.encode())
        # a long run's thousands: their dict, built once (the first pair of a name wins, as
        # in the scan), found by the tuple's identity (hashing it would cost the scan)
        known = _KEYS.get(id(keys))
        if known is None or known[0] is not keys:
            if len(_KEYS) >= _KEYS_SIZE:
                _KEYS.clear()
            known = _KEYS[id(keys)] = (keys, dict(reversed(keys)))
        found = known[1].get(seq_id)
        return zlib.crc32(seq_id.encode()) if found is None else found

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "vocab_size": self.vocab_size,
            "eos_per_mille": self.eos_per_mille,
            "eos_at": [list(pair) for pair in self.eos_at],
            "keys": [list(pair) for pair in self.keys],
            "spec": self.spec,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenModel:
        eos_at = tuple((str(seq_id), int(pos)) for seq_id, pos in data.get("eos_at", ()))
        keys = tuple((str(seq_id), int(key)) for seq_id, key in data.get("keys", ()))
        return cls(**{**data, "eos_at": eos_at, "keys": keys})
