"""What a run of an engine showed: plain values copied out at every step.

Per step: the scheduled sequences as the model runner sees them (where their computation
starts, how many tokens, their tokens and block tables), what the runner's own copy of each
carried (a tensor-parallel worker's pickled copy, or a runner built from the scheduler's
output alone), the tokens sampled, and the block pool after the step's two calls. With
them, the traits its adapter declared (the runner's rules): the checks need nothing else.
Nothing here is the engine's object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from schedcheck.engine.traits import Traits
from schedcheck.engine.workload import EngineWorkload


class Scheduled(NamedTuple):
    """One scheduled sequence at schedule() time."""

    name: str
    num_cached: int  # its computation starts at this position (the runner's rule)
    num_scheduled: int  # the number of positions it computes (a decode: 1)
    token_ids: tuple[int, ...]
    block_table: tuple[int, ...]
    # speculative decoding: the last `drafts` of token_ids are the draft tokens this step
    # computes after the request's own (scheduled for it, not yet verified)
    drafts: int = 0
    # a hybrid model's (issue 51): the block table of each of its other layers' KV cache
    # groups, in the order of the workload's `layers` (block_table is full attention's)
    groups: tuple[tuple[int, ...], ...] = ()

    @property
    def own(self) -> tuple[int, ...]:
        """Its tokens before the drafts: those it knows and those in flight."""
        return self.token_ids[: len(self.token_ids) - self.drafts]

    @property
    def draft_tokens(self) -> tuple[int, ...]:
        return self.token_ids[len(self.token_ids) - self.drafts :]

    @property
    def proposed(self) -> tuple[int, ...]:
        """Its drafts proposed: those before the first placeholder (UNKNOWN). A proposer
        that has fewer drafts than the engine verifies a step pads the rest (SGLang's
        chain of a fixed length), and verification rejects a placeholder."""
        drafts = self.draft_tokens
        return drafts[: drafts.index(UNKNOWN)] if UNKNOWN in drafts else drafts

    @property
    def padded(self) -> bool:
        """Its drafts are placeholders, not drafts proposed: vLLM pads a one-token
        admission to 1 + num_speculative_tokens rows of -1, which the sampler rejects."""
        return bool(self.drafts) and all(t == UNKNOWN for t in self.draft_tokens)


class Copy(NamedTuple):
    """What pickle.loads(pickle.dumps(seq)) held; None where the copy had no such field.
    num_cached and num_scheduled are the two fields the runner reads (Runner.fields:
    num_cached_tokens and num_scheduled_tokens in nano-vllm)."""

    token_ids: tuple[int, ...] | None
    last_token: int | None
    num_cached: int | None
    num_scheduled: int | None
    block_table: tuple[int, ...] | None
    num_tokens: int | None = None  # len(seq) as the copy has it


def computed_on(seq: Scheduled, copy: Copy | None) -> tuple[int, ...]:
    """The tokens `seq`'s step computes on, its drafts the runner's where the scheduler
    holds placeholders for them (-1: the worker keeps its drafts)."""
    if not seq.padded or copy is None or copy.token_ids is None:
        return seq.token_ids
    own = len(seq.own)
    drafts = copy.token_ids[own : own + seq.drafts]
    return seq.own + drafts if len(drafts) == seq.drafts else seq.token_ids


class Block(NamedTuple):
    """A KV block: nano-vllm's token_ids are the block's own tokens; vLLM's hash names a
    whole prefix, and token_ids are that prefix (read back through our hash function)."""

    ref_count: int
    hash: int
    token_ids: tuple[int, ...]


class Progress(NamedTuple):
    """An unfinished request's progress where steps overlap (vLLM's async scheduling)."""

    name: str
    computed: int  # num_computed_tokens
    placeholders: int  # num_output_placeholders: the tokens the scheduler counts in flight
    in_flight: int  # the tokens it has in flight: sampled in steps not yet updated (not dropped)


class Pool(NamedTuple):
    """The block manager and every added sequence's block table, at one moment."""

    blocks: tuple[Block, ...]
    free: tuple[int, ...]  # free_block_ids, in order
    used: tuple[int, ...]  # used_block_ids, sorted
    tables: dict[str, tuple[int, ...]]  # every sequence added so far
    tokens: dict[str, tuple[int, ...]]
    status: dict[str, str]  # WAITING, RUNNING or FINISHED
    cached: tuple[int, ...] = ()  # freed but cached, evictable, kept apart from free (sorted)
    # vLLM's: its null block, never handed out; its prefix cache's index (hash number, block
    # id), where a freed block stays findable while it waits in the free queue; the order of
    # its running list and waiting queue (names)
    reserved: tuple[int, ...] = ()
    cache_index: tuple[tuple[int, int], ...] = ()
    running: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    # vLLM's progress of each unfinished request, where steps overlap (async scheduling)
    progress: tuple[Progress, ...] = ()
    # blocks whose free the engine defers while a step in flight may still write them, one
    # reference each (vLLM's deferred_frees, with a KV connector that loads and overlapped
    # steps): held by no request, free once that step is done
    deferred: tuple[int, ...] = ()
    # the waiting requests in a queue of their own, taken first (vLLM 0.20 to 0.30's
    # skipped_waiting: a request waiting for remote KV, say): listed in `waiting` too
    aside: tuple[str, ...] = ()
    # a hybrid model's (issue 51): each sequence's block tables of its other layers' KV
    # cache groups, in the order of the workload's `layers` (`tables` are full attention's;
    # a group's table may hold the reserved null block where it freed what it no longer reads)
    groups: dict[str, tuple[tuple[int, ...], ...]] = {}  # noqa: RUF012 (never mutated)


class DraftStats(NamedTuple):
    """What the engine's own metrics say of the drafts one update verified (speculative
    decoding; vLLM's SpecDecodingStats, which its servers log): drafts verified, drafts
    accepted, and both by draft position."""

    drafts: int
    accepted: int
    drafts_per_position: tuple[int, ...]
    accepted_per_position: tuple[int, ...]


class Transfer(NamedTuple):
    """One event of a KV connector's (issue 50), in the step it happened: what the
    connector's scheduler side was told, what its worker did. Kinds:

    - "load": KV of `tokens`' positions `first ..` moved from the external store into the
      request's blocks `table` (its block ids as the connector was told them); phase
      "start" when the scheduler allocated them (`at` "schedule"), "end" when the worker
      reported the load done (`failed`: the block ids it could not load);
    - "save": KV of `tokens`' positions `first ..` moved from `table` into the store;
      "start" when the request finished (`at`: during "schedule" or an abort before it, or
      during the "update"), "end" when the worker reported it done;
    - "finished": the scheduler told the connector the request finished, with `table`
      (its `request_finished`): once per request, saved or not;
    - "lookup", phase "wait": the connector answered a lookup of the request "not yet".

    An engine's own offloading connector moves KV in jobs (`job`, its id; several a request
    at once) between the engine's blocks and the blocks of its offload tier (`remote`, one
    for each block moved, in order: the tier's own ids, whose KV E2 follows). Such a job
    may end at a step's start (`at` "forward": before the step's forward pass, the worker
    waiting for it there, as it does for a job the engine flushes because it handed the
    job's blocks on). A transfer is `held` where the engine keeps its blocks until it ends
    (a delayed free, a load into a request's own blocks); a job that is not may have its
    blocks freed, which the engine must flush before it writes into them again."""

    name: str
    kind: str
    phase: str
    table: tuple[int, ...]
    first: int
    tokens: tuple[int, ...]
    at: str = "schedule"
    failed: tuple[int, ...] = ()
    job: int = 0
    remote: tuple[int, ...] = ()
    held: bool = True

    @property
    def moved(self) -> range:
        """The positions whose KV it moves."""
        return range(self.first, len(self.tokens))


@dataclass(frozen=True)
class EngineStep:
    step: int
    is_prefill: bool
    scheduled: tuple[Scheduled, ...]
    copies: tuple[Copy, ...]
    sampled: tuple[int, ...]
    after_schedule: Pool
    after_postprocess: Pool | None  # None when postprocess() raised
    # False for a step of an engine core draining its queue, which only updates (vLLM's
    # async scheduling): no schedule() was called, so nothing was left out of it
    schedules: bool = True
    # the engine's metrics of the drafts this step's update verified (None: none said)
    draft_stats: DraftStats | None = None
    # a KV connector's transfers this step (issue 50), and the requests the step computed on
    # KV a failed load left (the simulated model samples garbage for them: E7 judges it)
    transfers: tuple[Transfer, ...] = ()
    tainted: tuple[str, ...] = ()
    # what the engine sent each request's client this step: (request, tokens sent), in the
    # order sent (an engine whose adapter records it: SGLang's); and the requests it ended
    # unasked this step by a limit of its own (refused: SGLang's max_queued_requests)
    streamed: tuple[tuple[str, int], ...] = ()
    refused: tuple[str, ...] = ()


PAUSED = "PAUSED"
"""A request's status (Pool.status) where it is a streaming-input session between turns,
waiting for its client's next chunk (vLLM's WAITING_FOR_STREAMING_REQ): not running, and not
waiting for the scheduler."""

UNKNOWN = -1
"""A token the model runner holds no value for: vLLM's placeholder for a token sampled on
the device and not yet copied back (async scheduling)."""

UNDRIVABLE = "undrivable"  # a stop that is no verdict: the engine is not of the shape its
# adapter drives


@dataclass(frozen=True)
class EngineFailure:
    """The run stopped: the engine raised (E6) or did not finish in time (E5); or its adapter
    could not drive it (UNDRIVABLE: a usage error, exit 2, never a verdict)."""

    check: str
    step: int
    call: str
    message: str


@dataclass(frozen=True)
class EngineTrace:
    workload: EngineWorkload
    traits: Traits  # the engine's rules it was driven with, as its adapter declares them
    steps: tuple[EngineStep, ...] = ()
    outputs: dict[str, tuple[int, ...]] = field(default_factory=dict)
    failure: EngineFailure | None = None

    def to_dict(self) -> dict[str, Any]:
        def pool(p: Pool | None) -> Any:
            return (
                None
                if p is None
                else {
                    "blocks": [list(b) for b in p.blocks],
                    "free": list(p.free),
                    "used": list(p.used),
                    "tables": p.tables,
                    "tokens": p.tokens,
                    "status": p.status,
                    "cached": list(p.cached),
                    "reserved": list(p.reserved),
                    "cache_index": [list(e) for e in p.cache_index],
                    "running": list(p.running),
                    "waiting": list(p.waiting),
                    "progress": [list(e) for e in p.progress],
                    **({"deferred": list(p.deferred)} if p.deferred else {}),
                    **({"aside": list(p.aside)} if p.aside else {}),
                    **(
                        {"groups": {n: [list(t) for t in g] for n, g in p.groups.items()}}
                        if p.groups
                        else {}
                    ),
                }
            )

        return {
            "workload": self.workload.to_dict(),
            "traits": self.traits.to_dict(),
            "steps": [
                {
                    "step": s.step,
                    "is_prefill": s.is_prefill,
                    "scheduled": [_scheduled(x) for x in s.scheduled],
                    "copies": [list(c) for c in s.copies],
                    "sampled": list(s.sampled),
                    "after_schedule": pool(s.after_schedule),
                    "after_postprocess": pool(s.after_postprocess),
                    "schedules": s.schedules,
                    "draft_stats": None
                    if s.draft_stats is None
                    else [
                        s.draft_stats.drafts,
                        s.draft_stats.accepted,
                        list(s.draft_stats.drafts_per_position),
                        list(s.draft_stats.accepted_per_position),
                    ],
                    **(
                        {
                            "transfers": [_plain(t) for t in s.transfers],
                            "tainted": list(s.tainted),
                        }
                        if s.transfers or s.tainted
                        else {}
                    ),
                    **({"streamed": [list(e) for e in s.streamed]} if s.streamed else {}),
                    **({"refused": list(s.refused)} if s.refused else {}),
                }
                for s in self.steps
            ],
            "outputs": {k: list(v) for k, v in self.outputs.items()},
            "failure": None if self.failure is None else vars(self.failure),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineTrace:
        def tup(x: Any) -> tuple[int, ...] | None:
            return None if x is None else tuple(int(v) for v in x)

        def pool(p: Any) -> Pool | None:
            if p is None:
                return None
            return Pool(
                tuple(Block(int(r), int(h), tup(t) or ()) for r, h, t in p["blocks"]),
                tup(p["free"]) or (),
                tup(p["used"]) or (),
                {k: tup(v) or () for k, v in p["tables"].items()},
                {k: tup(v) or () for k, v in p["tokens"].items()},
                {k: str(v) for k, v in p["status"].items()},
                tup(p.get("cached")) or (),
                tup(p.get("reserved")) or (),
                tuple((int(h), int(b)) for h, b in p.get("cache_index", ())),
                tuple(map(str, p.get("running", ()))),
                tuple(map(str, p.get("waiting", ()))),
                tuple(_progress(e) for e in p.get("progress", ())),
                tup(p.get("deferred")) or (),
                tuple(map(str, p.get("aside", ()))),
                {n: tuple(tup(t) or () for t in g) for n, g in p.get("groups", {}).items()},
            )

        steps = []
        for s in data["steps"]:
            after = pool(s["after_schedule"])
            assert after is not None
            steps.append(
                EngineStep(
                    int(s["step"]),
                    bool(s["is_prefill"]),
                    tuple(
                        Scheduled(
                            str(n),
                            int(c),
                            int(k),
                            tup(t) or (),
                            tup(b) or (),
                            int(rest[0]) if rest else 0,
                            tuple(tup(g) or () for g in (rest[1] if len(rest) > 1 else ())),
                        )
                        for n, c, k, t, b, *rest in s["scheduled"]
                    ),
                    tuple(
                        Copy(tup(t), _int(lt), _int(c), _int(k), tup(b), _int(nt))
                        for t, lt, c, k, b, nt in s["copies"]
                    ),
                    tup(s["sampled"]) or (),
                    after,
                    pool(s["after_postprocess"]),
                    bool(s.get("schedules", True)),
                    _draft_stats(s.get("draft_stats")),
                    tuple(_transfer(t) for t in s.get("transfers", ())),
                    tuple(map(str, s.get("tainted", ()))),
                    tuple((str(n), int(k)) for n, k in s.get("streamed", ())),
                    tuple(map(str, s.get("refused", ()))),
                )
            )
        failure = data["failure"]
        return cls(
            EngineWorkload.from_dict(data["workload"]),
            Traits.from_dict(data["traits"]),
            tuple(steps),
            {k: tup(v) or () for k, v in data["outputs"].items()},
            None if failure is None else EngineFailure(**failure),
        )


def _scheduled(x: Scheduled) -> list[Any]:
    """A scheduled sequence as saved: a hybrid model's group tables last, where it has
    them (a trace saved before them has none)."""
    said: list[Any] = [x.name, x.num_cached, x.num_scheduled, list(x.token_ids)]
    said += [list(x.block_table), x.drafts]
    return [*said, [list(g) for g in x.groups]] if x.groups else said


def _progress(e: list[Any]) -> Progress:
    """A saved entry; one saved before `in_flight` was kept had as many as it counted."""
    name, computed, placeholders, *rest = e
    return Progress(
        str(name), int(computed), int(placeholders), int(rest[0] if rest else placeholders)
    )


def _plain(t: Transfer) -> list[Any]:
    said = [t.name, t.kind, t.phase, list(t.table), t.first, list(t.tokens), t.at, list(t.failed)]
    if t.job or t.remote or not t.held:  # an offloading job's (saved before them: none)
        said += [t.job, list(t.remote), t.held]
    return said


def _transfer(e: list[Any]) -> Transfer:
    name, kind, phase, table, first, tokens, at, failed, *job = e
    return Transfer(
        str(name),
        str(kind),
        str(phase),
        tuple(map(int, table)),
        int(first),
        tuple(map(int, tokens)),
        str(at),
        tuple(map(int, failed)),
        *((int(job[0]), tuple(map(int, job[1])), bool(job[2])) if job else ()),
    )


def _int(x: Any) -> int | None:
    return None if x is None else int(x)


def _draft_stats(data: Any) -> DraftStats | None:
    if data is None:
        return None
    drafts, accepted, per_drafts, per_accepted = data
    return DraftStats(
        int(drafts),
        int(accepted),
        tuple(int(n) for n in per_drafts),
        tuple(int(n) for n in per_accepted),
    )
