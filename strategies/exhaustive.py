"""The scopes of bounded-exhaustive checking: what the environment may do, written out.

A scope is a grid of configs and, for each, a `Space`: the kinds of request that may
arrive (prompt_len, max_tokens), how many in all, at which steps, how many at once, and
whether a sampled token may be eos. `check --exhaustive` explores every behaviour of an
implementation reachable in each space (schedcheck/search/explore.py); `workloads` writes
out the same space as whole workloads, one by one, which is what a visited set saves.

Canonical forms keep each workload once: requests are named a1, a2, ... in arrival order
(names carry no behaviour but the token stream), requests arriving at one step come in a
fixed order of kinds, the first arrives at step 1 (leading idle steps change nothing), and
eos as the last allowed token is left out (it ends the sequence just as max_tokens does).
Every workload calls update() a second time at each step: it must change nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from schedcheck.model.tokens import TokenModel
from schedcheck.model.workload import Config, Request, Workload, blocks_for
from schedcheck.strategies.workloads import REVERSED

Kind = tuple[int, int]  # (prompt_len, max_tokens)


@dataclass(frozen=True)
class Space:
    """One config, and what may arrive: the unit the explorer searches."""

    config: Config  # eos_token_id set, or eos choices change nothing
    kinds: tuple[Kind, ...]
    requests: int  # at most this many in all
    arrival_steps: int  # they arrive at steps 1 .. arrival_steps
    per_step: int  # at most this many at one step
    eos: bool = True  # whether a sampled token may be eos (where it is not the last)


@dataclass(frozen=True)
class Scope:
    """A grid of configs, each with the same kinds of request (those that fit it)."""

    name: str
    num_blocks: tuple[int, ...]
    block_size: tuple[int, ...]
    max_num_seqs: tuple[int, ...]
    budget: tuple[int, ...]  # max_num_batched_tokens
    kinds: tuple[Kind, ...]
    requests: int
    arrival_steps: int
    per_step: int

    def spaces(self) -> list[Space]:
        """One space per config, with the kinds that fit it alone (feasible input only)."""
        found = []
        grid = (self.num_blocks, self.block_size, self.max_num_seqs, self.budget)
        for nb, bs, seqs, budget in itertools.product(*grid):
            fits = tuple(k for k in self.kinds if blocks_for(k[0] + k[1] - 1, bs) <= nb)
            if fits:
                found.append(
                    Space(
                        Config(nb, bs, seqs, budget, 0),
                        fits,
                        self.requests,
                        self.arrival_steps,
                        self.per_step,
                    )
                )
        return found

    def workloads(self) -> Iterator[Workload]:
        for space in self.spaces():
            yield from workloads(space)

    def describe(self) -> str:
        def some(values: tuple[int, ...]) -> str:
            return "{" + ", ".join(map(str, values)) + "}"

        kinds = ", ".join(f"{p}+{m}" for p, m in self.kinds)
        return (
            f"scope {self.name}: num_blocks in {some(self.num_blocks)}, block_size in "
            f"{some(self.block_size)}, max_num_seqs in {some(self.max_num_seqs)}, "
            f"max_num_batched_tokens in {some(self.budget)}; up to {self.requests} requests "
            f"(prompt_len+max_tokens: {kinds}; those that fit), arriving at steps 1 to "
            f"{self.arrival_steps}, at most {self.per_step} at a time; any sampled token but "
            "the last allowed may be eos (token 0)"
        )


KINDS = ((1, 2), (2, 3), (5, 2))  # decode-heavy, mixed, and a prompt longer than any budget
# fmt: off
SCOPES = {
    # Seconds: the mode itself, end to end, on every push; not a guarantee worth stating.
    "smoke": Scope("smoke", (2, 3), (1, 2), (1, 2), (2, 3), ((1, 1), (1, 2), (2, 2)), 2, 2, 2),
    # The default: three running at once, chunks of a prompt longer than the budget left,
    # second preemptions after output (docs/exhaustive.md).
    "small": Scope("small", (3, 4, 5, 6), (1, 2, 3), (2, 3), (3, 4), KINDS, 3, 3, 2),
    "medium": Scope("medium", (3, 4, 5, 6), (1, 2, 3), (1, 2, 3), (2, 3, 4, 5),
                    ((1, 1), (1, 3), (2, 2), (3, 2), (6, 1)), 3, 3, 2),
    "nightly": Scope("nightly", (3, 4, 5, 6), (1, 2, 3), (1, 2, 3), (2, 3, 4, 5),
                     ((1, 1), (1, 3), (2, 2), (3, 2), (6, 1)), 4, 3, 2),
}
# fmt: on


def workloads(space: Space) -> Iterator[Workload]:
    """Every workload of `space` once: each plan of arrivals, each choice of eos."""
    for requests in plans(space):
        options = [(None, *range(r.max_tokens - 1)) if space.eos else (None,) for r in requests]
        for positions in itertools.product(*options):
            eos_at = tuple(
                (r.seq_id, p) for r, p in zip(requests, positions, strict=True) if p is not None
            )
            yield Workload(space.config, requests, TokenModel(eos_at=eos_at), reupdate=True)


def arrivals(space: Space, step: int, so_far: int) -> Iterator[tuple[Request, ...]]:
    """What may arrive at `step` after `so_far` requests: nothing, or up to `per_step` of
    the kinds, in a fixed order (the explorer's edges and `workloads` share this)."""
    room = min(space.per_step, space.requests - so_far)
    if step > space.arrival_steps or room <= 0:
        yield ()
        return
    for count in range(room + 1):
        for kinds in itertools.combinations_with_replacement(space.kinds, count):
            yield tuple(
                Request(REVERSED(so_far + 1 + i), p, m, step) for i, (p, m) in enumerate(kinds)
            )


def plans(
    space: Space, step: int = 1, so_far: tuple[Request, ...] = ()
) -> Iterator[tuple[Request, ...]]:
    """Every plan of arrivals from `step` on, after `so_far`: the requests of a workload."""
    if step > space.arrival_steps or len(so_far) == space.requests:
        if so_far:
            yield so_far
        return
    for arrived in arrivals(space, step, len(so_far)):
        if not so_far and not arrived:
            continue  # the first request arrives at step 1
        yield from plans(space, step + 1, so_far + arrived)
