"""Every workload of a small scope, once: bounded-exhaustive verification.

A scope bounds the config and the requests; `enumerate_scope` yields each feasible workload
in it exactly once, in a canonical form: requests are named a1, a2, ... in arrival order
(names carry no behaviour but the token stream, so two workloads that differ only by names
are the same), the first arrives at step 1 (a run that starts with idle steps is the same
run, later), and the token model says eos only where `eos_at` puts it. Every workload
calls update() a second time at each step (it must change nothing).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from invariants.tokens import TokenModel
from invariants.workload import Config, Request, Workload


@dataclass(frozen=True)
class Scope:
    name: str
    num_blocks: int
    block_size: int
    max_num_seqs: int
    budget: int
    requests: int
    prompt_len: int
    max_tokens: int
    arrival_steps: int  # requests arrive at step 1 .. arrival_steps
    eos_positions: tuple[int | None, ...]  # where a request's eos may come (None: never)

    def describe(self) -> str:
        eos = ", ".join("never" if p is None else f"token {p + 1}" for p in self.eos_positions)
        return (
            f"scope {self.name}: num_blocks <= {self.num_blocks}, block_size <= "
            f"{self.block_size}, max_num_seqs <= {self.max_num_seqs}, max_num_batched_tokens "
            f"<= {self.budget}; 1 to {self.requests} requests with prompt_len <= "
            f"{self.prompt_len} and max_tokens <= {self.max_tokens}, arriving at steps 1 to "
            f"{self.arrival_steps}; eos (token 0) at: {eos}; feasible workloads only"
        )


SCOPES = {
    # A few seconds: the mode itself, end to end (a smoke test on every push), not a guarantee
    # worth stating; `small` is the default.
    "smoke": Scope("smoke", 3, 2, 2, 3, 2, 2, 2, 2, (None, 0)),
    "small": Scope("small", 4, 2, 2, 4, 3, 2, 2, 2, (None, 0)),
    "medium": Scope("medium", 4, 2, 2, 4, 3, 3, 2, 2, (None, 0)),
    "nightly": Scope("nightly", 5, 2, 3, 6, 3, 4, 3, 3, (None, 0, 1)),
}


def enumerate_scope(scope: Scope) -> Iterator[Workload]:
    """Every feasible workload of `scope`, once, in a fixed order."""
    kinds = [
        (p, m, eos)
        for p in range(1, scope.prompt_len + 1)
        for m in range(1, scope.max_tokens + 1)
        for eos in scope.eos_positions
        # eos as the last allowed token ends the sequence just as max_tokens would
        if eos is None or eos < m - 1
    ]
    configs = list(itertools.product(
        range(1, scope.num_blocks + 1), range(1, scope.block_size + 1),
        range(1, scope.max_num_seqs + 1), range(1, scope.budget + 1),
    ))  # fmt: skip
    for count in range(1, scope.requests + 1):  # fewest requests first: smallest worlds
        for nb, bs, seqs, budget in configs:
            fits = [k for k in kinds if -(-(k[0] + k[1] - 1) // bs) <= nb]
            for chosen in itertools.product(fits, repeat=count):
                for arrivals in _arrivals(count, scope.arrival_steps):
                    yield _workload(Config(nb, bs, seqs, budget, 0), chosen, arrivals)


def _arrivals(count: int, steps: int) -> Iterator[tuple[int, ...]]:
    """Non-decreasing arrival steps, the first at step 1."""
    for rest in itertools.combinations_with_replacement(range(1, steps + 1), count - 1):
        yield (1, *rest)


def _workload(
    config: Config, chosen: tuple[tuple[int, int, int | None], ...], arrivals: tuple[int, ...]
) -> Workload:
    requests = tuple(
        Request(f"a{i}", p, m, arrival)
        for i, ((p, m, _), arrival) in enumerate(zip(chosen, arrivals, strict=True), start=1)
    )
    eos_at = tuple(
        (f"a{i}", eos) for i, (_, _, eos) in enumerate(chosen, start=1) if eos is not None
    )
    # update() twice per step: the second must change nothing, so it only adds checking.
    return Workload(config, requests, TokenModel(eos_at=eos_at), reupdate=True)
