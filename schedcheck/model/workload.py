"""What a run is given: a config, requests with arrival steps, and a token model. Plain data.

Steps are numbered from 1, as in the spec's tables; a request's `arrival` is the step at
whose start the driver adds it. Every workload round-trips through JSON, so a
counterexample can be saved, replayed and read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from schedcheck.model.tokens import TokenModel


def blocks_for(num_tokens: int, block_size: int) -> int:
    """KV blocks that hold `num_tokens` tokens: ceil(num_tokens / block_size)."""
    return -(-num_tokens // block_size)


@dataclass(frozen=True)
class Config:
    """The scheduler's constructor arguments, `sample_fn` aside."""

    num_blocks: int
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    eos_token_id: int | None = None


@dataclass(frozen=True)
class Request:
    """One sequence to add: at the start of step `arrival`."""

    seq_id: str
    prompt_len: int
    max_tokens: int
    arrival: int = 1

    def peak_blocks(self, block_size: int) -> int:
        """The most KV it ever holds: its last sampled token is never computed."""
        return blocks_for(self.prompt_len + self.max_tokens - 1, block_size)


@dataclass(frozen=True)
class Workload:
    """A config, the requests in arrival order, and the model that samples their tokens.

    `reupdate` makes the driver call `update()` a second time at every step: it must
    return [] and change nothing (spec, `update()`). `omit_defaults` makes it leave out
    the constructor's arguments whose value is the contract's default (`eos_token_id=None`),
    as a caller may.
    """

    config: Config
    requests: tuple[Request, ...]
    model: TokenModel = field(default_factory=TokenModel)
    reupdate: bool = False
    omit_defaults: bool = False
    # A long run (issue 47): the driver copies the whole state only at every `sample_every`-th
    # call's step and once every request finished; at the others the counters alone
    # (blocks_used, num_preemptions), so that a run of tens of thousands of steps over
    # thousands of requests stays cheap. 0: the whole state after every call.
    sample_every: int = 0

    def __post_init__(self) -> None:
        if type(self.sample_every) is not int or self.sample_every < 0:
            raise ValueError(
                f"sample_every must be a whole number of steps, 0 or more, got "
                f"{self.sample_every!r}"
            )
        seen: set[str] = set()
        last_arrival = 1
        for request in self.requests:
            if request.seq_id in seen:
                raise ValueError(f"requests: seq_id {request.seq_id!r} appears twice")
            if request.arrival < last_arrival:
                raise ValueError(
                    f"requests: {request.seq_id!r} arrives at step {request.arrival}, before "
                    f"the request listed ahead of it (step {last_arrival}); list them in "
                    "arrival order"
                )
            seen.add(request.seq_id)
            last_arrival = request.arrival

    def omitted(self) -> tuple[str, ...]:
        """The constructor's arguments the driver leaves out (at the contract's default)."""
        return ("eos_token_id",) if self.omit_defaults and self.config.eos_token_id is None else ()

    def max_tokens(self) -> dict[str, int]:
        return {r.seq_id: r.max_tokens for r in self.requests}

    def arrivals(self) -> dict[int, list[Request]]:
        """The requests the driver adds at the start of each step, in arrival order."""
        by_step: dict[int, list[Request]] = {}
        for request in self.requests:
            by_step.setdefault(request.arrival, []).append(request)
        return by_step

    def last_arrival(self) -> int:
        return self.requests[-1].arrival if self.requests else 1

    def size(self) -> tuple[int, int, int]:
        """What "smallest" means for a counterexample: fewest requests, then fewest tokens
        (prompts and outputs), then the smallest config."""
        c = self.config
        tokens = sum(r.prompt_len + r.max_tokens for r in self.requests)
        config = c.num_blocks + c.block_size + c.max_num_seqs + c.max_num_batched_tokens
        return len(self.requests), tokens, config

    def infeasible(self) -> list[Request]:
        """Requests that could never finish even alone; a feasible workload has none."""
        return [
            r
            for r in self.requests
            if r.peak_blocks(self.config.block_size) > self.config.num_blocks
        ]

    def unconstrained(self) -> Workload:
        """The same workload with KV blocks enough for every request at once: D1's twin run."""
        total = sum(r.peak_blocks(self.config.block_size) for r in self.requests)
        config = replace(self.config, num_blocks=max(total, self.config.num_blocks))
        return replace(self, config=config)

    def to_dict(self) -> dict[str, Any]:
        """What `asdict` gives, built directly (a run sends its workload to the worker)."""
        return {
            "config": dict(vars(self.config)),
            "requests": [dict(vars(r)) for r in self.requests],
            "model": self.model.to_dict(),
            "reupdate": self.reupdate,
            "omit_defaults": self.omit_defaults,
            # only where it is set: a saved workload of every other kind reads as before
            **({"sample_every": self.sample_every} if self.sample_every else {}),
        }

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Workload:
        model = data.get("model", {})
        return cls(
            config=Config(**data["config"]),
            requests=tuple(Request(**r) for r in data["requests"]),
            model=TokenModel.from_dict(model),
            reupdate=bool(data.get("reupdate", False)),
            omit_defaults=bool(data.get("omit_defaults", False)),
            sample_every=data.get("sample_every", 0),
        )

    @classmethod
    def from_json(cls, text: str) -> Workload:
        return cls.from_dict(json.loads(text))


# A script: the stateful test's calls as plain data, played in one go (in a worker, one
# command per run, not one per call): ["add", seq_id] adds that request of the workload
# (at its arrival step, the next one); ["step"] is schedule() then update(); ["again"] is
# update() once more with no schedule() in between; ["finish"] steps until every request
# finished, or the liveness bound.
Script = list[list[str]]
