"""Exhaustive checking as a model checker (issue 18, first version, not yet behind
`check --exhaustive`): the reachable states of an implementation under a scope, each
explored once.

A path is a workload: the config, the requests that arrived so far (each with its step)
and the eos decisions so far (`TokenModel.eos_at`). From the state after step k, an edge
picks the requests that arrive at step k+1, then which of the sequences that sample at
step k+1 say eos. Each edge's workload is verified whole (every check, D1 and R1
included: `run` finishes a path by itself, with no more arrivals and no eos beyond
`eos_at`), so every transition explored is checked, the ones into a state seen before
too. The state after step k+1, in a canonical form, is the node; a node seen before is not
expanded again. Breadth-first, so the first failure found has the fewest steps.

The visited set is sound for an implementation whose future depends only on what the
snapshot shows; hidden state (a step counter, say) can make two equal snapshots differ.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from harness.sandbox.impl import Implementation
from harness.verdict.verify import Verdict, verify
from invariants.tokens import TokenModel
from invariants.trace import State, Trace
from invariants.workload import Config, Request, Workload


@dataclass(frozen=True)
class Space:
    """What the environment may do: the config, the kinds of request, how many and when."""

    config: Config  # eos_token_id set, or eos choices change nothing
    kinds: tuple[tuple[int, int], ...]  # (prompt_len, max_tokens) a request may have
    requests: int  # at most this many in all
    arrival_steps: int  # they arrive at steps 1 .. arrival_steps
    per_step: int  # at most this many at one step
    eos: bool = True  # whether a sampled token may be eos (where it is not the last)


@dataclass
class Exploration:
    states: int = 0  # distinct canonical states reached
    edges: int = 0  # transitions explored: one verified workload each
    failure: tuple[Workload, Verdict] | None = None


@dataclass(frozen=True)
class _Path:
    requests: tuple[Request, ...] = ()
    eos_at: tuple[tuple[str, int], ...] = ()
    steps: int = 0


@dataclass
class _Search:
    impl: Implementation
    space: Space
    dedup: bool
    found: Exploration = field(default_factory=Exploration)
    seen: set[object] = field(default_factory=set)
    frontier: deque[_Path] = field(default_factory=deque)

    def edge(self, requests: tuple[Request, ...], eos_at: tuple[tuple[str, int], ...]) -> Trace:
        workload = Workload(self.space.config, requests, TokenModel(eos_at=eos_at), reupdate=True)
        verdict = verify(self.impl, workload)
        self.found.edges += 1
        if not verdict.ok and self.found.failure is None:
            self.found.failure = (workload, verdict)
        return verdict.trace

    def reach(self, trace: Trace, path: _Path) -> None:
        if len(trace.steps) < path.steps:
            return  # everything had finished before this step: nothing new
        state = trace.steps[path.steps - 1].last()
        more = (
            self.space.requests - len(path.requests) if path.steps < self.space.arrival_steps else 0
        )
        key = canonical(state, path.requests, more)
        if self.dedup and key in self.seen:
            return
        self.seen.add(key)
        self.found.states += 1
        live = any(s.status != "FINISHED" for s in state.seqs.values())
        if live or more:
            self.frontier.append(path)


def explore(impl: Implementation, space: Space, dedup: bool = True) -> Exploration:
    """Every state reachable in `space`, breadth-first; stops at the first failure.
    `dedup=False` walks the tree of paths instead (what the visited set saves)."""
    search = _Search(impl, space, dedup)
    search.frontier.append(_Path())
    while search.frontier and search.found.failure is None:
        path = search.frontier.popleft()
        step = path.steps + 1
        for arrived in _arrivals(space, path, step):
            requests = path.requests + arrived
            if not requests:
                continue  # an idle step before anything arrived is the same run, later
            trace = search.edge(requests, path.eos_at)
            search.reach(trace, _Path(requests, path.eos_at, step))
            for eos_at in _eos_choices(space, trace, step, path.eos_at, requests):
                search.reach(search.edge(requests, eos_at), _Path(requests, eos_at, step))
            if search.found.failure is not None:
                break
    return search.found


def canonical(state: State, requests: tuple[Request, ...], more: int) -> object:
    """What decides the future: the live sequences in arrival order (renamed by position),
    each with what it has computed and may still produce, the queues, the blocks in use,
    and how many requests may still arrive. Finished sequences and token values drop out."""
    kinds = {r.seq_id: (r.prompt_len, r.max_tokens) for r in requests}
    live = [sid for sid, s in state.seqs.items() if s.status != "FINISHED"]
    index = {sid: i for i, sid in enumerate(live)}
    seqs = tuple(
        (s.status, s.num_computed, s.num_tokens, s.num_blocks, len(s.output), kinds.get(sid))
        for sid, s in state.seqs.items()
        if sid in index
    )
    queues = tuple(tuple(index.get(sid, -1) for sid in q) for q in (state.waiting, state.running))
    return seqs, queues, state.blocks_used, more


def _arrivals(space: Space, path: _Path, step: int) -> Iterator[tuple[Request, ...]]:
    room = min(space.per_step, space.requests - len(path.requests))
    if step > space.arrival_steps or room <= 0:
        yield ()
        return
    for count in range(room + 1):
        for kinds in itertools.combinations_with_replacement(space.kinds, count):
            first = len(path.requests) + 1
            yield tuple(Request(f"a{first + i}", p, m, step) for i, (p, m) in enumerate(kinds))


def _eos_choices(
    space: Space,
    trace: Trace,
    step: int,
    eos_at: tuple[tuple[str, int], ...],
    requests: tuple[Request, ...],
) -> Iterator[tuple[tuple[str, int], ...]]:
    """Each non-empty set of this step's samplers saying eos (the spec's rule for who
    samples: a sequence whose prefill completes with this step's tokens)."""
    if not space.eos or len(trace.steps) < step:
        return
    record = trace.steps[step - 1]
    limit = {r.seq_id: r.max_tokens for r in requests}
    samplers = []
    for sid, n in record.schedule:
        seq = record.scheduled.seqs.get(sid)
        if seq is None or seq.num_computed + n < seq.num_tokens:
            continue
        position = len(seq.output)
        if position < limit.get(sid, 0) - 1:  # eos as the last token is max_tokens' end
            samplers.append((sid, position))
    for count in range(1, len(samplers) + 1):
        for chosen in itertools.combinations(samplers, count):
            yield eos_at + chosen
