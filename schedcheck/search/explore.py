"""Exhaustive checking as a model checker (issue 18): the reachable states of an
implementation in the spaces of a scope, each explored once.

A path is a workload: the config, the requests that arrived so far (each with its step)
and the eos decisions so far (`TokenModel.eos_at`). From the state after step k, an edge
picks the requests that arrive at step k+1, then which of the sequences that sample at
step k+1 say eos. Each edge's workload is verified whole (every check, D1 and R1
included: `run` finishes a path by itself, with no more arrivals and no eos beyond
`eos_at`), so every transition explored is checked, the ones into a state seen before
too. The state after step k+1, in a canonical form, is the node; a node seen before is not
expanded again. Breadth-first, so the first failure found has the fewest steps.

Reaching a state re-runs its path from the start in the worker: the submission stays a
black box that hands back plain data, and a hang or a crash anywhere is a failure with
its path. The visited set is sound for an implementation whose future depends only on
what the snapshots show (each sequence's preemptions so far included); other hidden state
(a step counter, say) can make two equal snapshots differ, and then a behaviour behind the
second one may go unexplored.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from schedcheck.drive.impl import Implementation
from schedcheck.model.tokens import TokenModel
from schedcheck.model.trace import State, Trace
from schedcheck.model.workload import Request, Workload
from schedcheck.strategies.exhaustive import Space, arrivals
from schedcheck.verdict.verify import Verdict, verify


@dataclass
class Exploration:
    states: int = 0  # distinct canonical states reached
    edges: int = 0  # transitions explored: one verified workload each
    failure: tuple[Workload, Verdict] | None = None
    depth: int = 0  # the failing path's steps
    space: Space | None = None  # the space it was found in
    finished: bool = False  # every reachable state of every space was explored


@dataclass(frozen=True)
class _Path:
    requests: tuple[Request, ...] = ()
    eos_at: tuple[tuple[str, int], ...] = ()
    steps: int = 0


@dataclass
class _Search:
    """One space's search: its visited set and its frontier, one depth at a time."""

    impl: Implementation
    space: Space
    dedup: bool
    found: Exploration  # shared by the spaces explored together
    seen: set[object] = field(default_factory=set)
    frontier: deque[_Path] = field(default_factory=lambda: deque([_Path()]))

    def level(self) -> None:
        """Expand every path of the current depth (one step longer each), unless a failure
        is found."""
        for _ in range(len(self.frontier)):
            if self.found.failure is not None:
                return
            self.expand(self.frontier.popleft())

    def expand(self, path: _Path) -> None:
        step = path.steps + 1
        for arrived in arrivals(self.space, step, len(path.requests)):
            requests = path.requests + arrived
            if not requests:
                continue  # an idle step before anything arrived is the same run, later
            trace = self.edge(_Path(requests, path.eos_at, step))
            for eos_at in _eos_choices(self.space, trace, step, path.eos_at, requests):
                self.edge(_Path(requests, eos_at, step))
            if self.found.failure is not None:
                return

    def edge(self, path: _Path) -> Trace:
        """Verify the path's workload whole, then reach the state it ends in."""
        model = TokenModel(eos_at=path.eos_at)
        workload = Workload(self.space.config, path.requests, model, reupdate=True)
        verdict = verify(self.impl, workload)
        self.found.edges += 1
        if not verdict.ok and self.found.failure is None:
            self.found.failure = (workload, verdict)
            self.found.depth, self.found.space = path.steps, self.space
        self.reach(verdict.trace, path)
        return verdict.trace

    def reach(self, trace: Trace, path: _Path) -> None:
        if len(trace.steps) < path.steps:
            return  # everything had finished before this step: nothing new
        state = trace.steps[path.steps - 1].last()
        more = (
            self.space.requests - len(path.requests) if path.steps < self.space.arrival_steps else 0
        )
        key = canonical(state, path.requests, more, preemptions(trace, path.steps))
        if self.dedup and key in self.seen:
            return
        self.seen.add(key)
        self.found.states += 1
        live = any(s.status != "FINISHED" for s in state.seqs.values())
        if live or more:
            self.frontier.append(path)


def explore(
    impl: Implementation,
    spaces: Sequence[Space],
    dedup: bool = True,
    stop: Callable[[int], bool] = lambda depth: False,
) -> Exploration:
    """Every state reachable in the spaces, breadth-first across all of them (depth 1 of
    every space, then depth 2, ...), so the first failure found is on a path of the fewest
    steps, and the first such in the spaces' order: the same one on every run. It stops
    there, or before a depth that `stop(depth)` refuses (another process found a failure
    at a smaller depth: a depth is always finished, so the overall choice stays the same).
    `dedup=False` walks the tree of paths instead (what the visited set saves)."""
    found = Exploration()
    searches = [_Search(impl, space, dedup, found) for space in spaces]
    depth = 0
    while found.failure is None:
        searches = [s for s in searches if s.frontier]
        if not searches:
            found.finished = True
            break
        depth += 1
        if stop(depth):
            break
        for search in searches:
            search.level()
            if found.failure is not None:
                break
    return found


def canonical(
    state: State, requests: tuple[Request, ...], more: int, preempted: dict[str, int]
) -> object:
    """What decides the future: the live sequences in arrival order (renamed by position),
    each with what it has computed and may still produce and how often it was preempted,
    the queues, the blocks in use, the preemption counter, and how many requests may still
    arrive. Finished sequences and token values drop out (they decide nothing a correct
    scheduler does next)."""
    kinds = {r.seq_id: (r.prompt_len, r.max_tokens) for r in requests}
    live = [sid for sid, s in state.seqs.items() if s.status != "FINISHED"]
    index = {sid: i for i, sid in enumerate(live)}
    seqs = tuple(
        (
            s.status,
            s.num_computed,
            s.num_tokens,
            s.num_blocks,
            len(s.output),
            kinds.get(sid),
            preempted.get(sid, 0),
        )
        for sid, s in state.seqs.items()
        if sid in index
    )
    queues = tuple(tuple(index.get(sid, -1) for sid in q) for q in (state.waiting, state.running))
    return seqs, queues, state.blocks_used, more, state.num_preemptions


def preemptions(trace: Trace, steps: int) -> dict[str, int]:
    """How often each sequence went from running to waiting in the first `steps` steps, as
    the snapshots show it: history a submission may keep (a set of sequences preempted
    before) that two equal snapshots would otherwise merge. A sequence admitted and
    preempted within one schedule() call is not seen."""
    counts: dict[str, int] = {}
    before: dict[str, str] = {}
    for step in trace.steps[:steps]:
        for state in (step.scheduled, step.last()):
            for sid, seq in state.seqs.items():
                if before.get(sid) == "RUNNING" and seq.status == "WAITING":
                    counts[sid] = counts.get(sid, 0) + 1
                before[sid] = seq.status
    return counts


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
