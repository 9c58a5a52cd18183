"""An engine workload: a config, requests over a tiny vocabulary, and the token function.

The simulated model's next token is a deterministic function of the whole sequence so far
(prompt and output), so every request's output is fixed by its own tokens alone: what it
produces with preemption, chunking and prefix sharing must equal what it produces run
alone (E7). eos is token 0; the vocabulary is 1..vocab, small so that prompts share
prefixes and the prefix cache is hit often.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from schedcheck.model.workload import blocks_for

EOS = 0


@dataclass(frozen=True)
class EngineConfig:
    """The fields of nano-vllm's Config that its scheduler reads."""

    num_blocks: int  # num_kvcache_blocks
    block_size: int  # kvcache_block_size
    max_num_seqs: int
    max_num_batched_tokens: int


@dataclass(frozen=True)
class EngineRequest:
    name: str  # r1, r2, ... in the order they are added
    prompt: tuple[int, ...]
    max_tokens: int
    ignore_eos: bool = False
    arrival: int = 1  # added at the start of this step

    def peak_blocks(self, block_size: int) -> int:
        """The most KV it holds: its last sampled token is never computed."""
        return blocks_for(len(self.prompt) + self.max_tokens - 1, block_size)


@dataclass(frozen=True)
class EngineWorkload:
    config: EngineConfig
    requests: tuple[EngineRequest, ...]
    vocab: int = 2
    eos_per_16: int = 2  # how often the model says eos: crc % 16 < eos_per_16

    def next_token(self, tokens: Sequence[int]) -> int:
        """The simulated model: a function of the whole sequence, the same in every process."""
        h = zlib.crc32(",".join(map(str, tokens)).encode())
        return EOS if h % 16 < self.eos_per_16 else 1 + (h >> 4) % self.vocab

    def alone(self, request: EngineRequest) -> tuple[int, ...]:
        """Its output run alone: ample blocks, no preemption, no sharing (E7)."""
        tokens, out = list(request.prompt), list[int]()
        while len(out) < request.max_tokens:
            token = self.next_token(tokens)
            tokens.append(token)
            out.append(token)
            if token == EOS and not request.ignore_eos:
                break
        return tuple(out)

    def longest(self) -> int:
        """The longest any of its sequences grows (prompt and every output token): the
        max_model_len it runs with."""
        return max((len(r.prompt) + r.max_tokens for r in self.requests), default=1)

    def problems(self) -> list[str]:
        """Why this is not valid input for an engine (empty when it is): a request that
        cannot fit alone, or a token budget below max_num_seqs (a decode step may
        schedule max_num_seqs tokens whatever the budget, as nano-vllm's does)."""
        c = self.config
        found = [
            f"{r.name} needs {r.peak_blocks(c.block_size)} KV blocks, more than num_blocks "
            f"{c.num_blocks}"
            for r in self.requests
            if r.peak_blocks(c.block_size) > c.num_blocks
        ]
        if c.block_size < 2:
            found.append(
                f"kvcache_block_size {c.block_size} is below 2, which nano-vllm "
                "never runs with (docs/engines.md)"
            )
        if c.max_num_batched_tokens < c.max_num_seqs:
            found.append(
                f"max_num_batched_tokens {c.max_num_batched_tokens} is below "
                f"max_num_seqs {c.max_num_seqs}"
            )
        return found

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineWorkload:
        requests = tuple(
            EngineRequest(
                str(r["name"]),
                tuple(map(int, r["prompt"])),
                int(r["max_tokens"]),
                bool(r["ignore_eos"]),
                int(r["arrival"]),
            )
            for r in data["requests"]
        )
        return cls(
            EngineConfig(**{k: int(v) for k, v in data["config"].items()}),
            requests,
            int(data["vocab"]),
            int(data["eos_per_16"]),
        )

    @classmethod
    def from_json(cls, text: str) -> EngineWorkload:
        return cls.from_dict(json.loads(text))
