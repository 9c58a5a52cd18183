"""E18 and E19: a KV connector's transfers (issue 50), read off the trace's Transfer events
(what the connector was told, what its worker did) and the pools around them.

E18: a transfer's blocks stay the engine's until the transfer ends. From the call that
started it (the schedule() that allocated a load's blocks; the call that finished the
request whose save it is) to the step whose output reports it done, no block it moves is
free (ref count 0, or in the free queue); a block an asynchronous load writes into is in
no other request's block table and not in the prefix cache's index (a request handed it
would read KV that has not arrived).

E19: the connector is told what the scheduler did. A request's `request_finished` comes
once, and for every request that finishes; the blocks a load was told to fill are the
request's own blocks at those positions; every transfer the engine started ends before
the engine stops stepping (one still running holds its blocks for good).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from schedcheck.engine.kv import span as span_of
from schedcheck.engine.trace import EngineTrace, Pool, Transfer
from schedcheck.invariants.violation import Violation

__all__ = ["Span", "check_e18", "check_e19", "spans"]


class Span(NamedTuple):
    """One transfer from its start to its end (None: it never ended)."""

    start: Transfer
    started: int  # the step
    end: Transfer | None
    ended: int  # the step whose output reported it done (0: never)


def spans(trace: EngineTrace) -> list[Span]:
    """Every load and save, paired with its end (the first after it of that request)."""
    made: list[Span] = []
    for step in trace.steps:
        for t in step.transfers:
            if t.kind not in ("load", "save"):
                continue
            if t.phase == "start":
                made.append(Span(t, step.step, None, 0))
                continue
            for i, s in enumerate(made):
                start = s.start
                if s.end is None and (start.name, start.kind, start.job) == (t.name, t.kind, t.job):
                    made[i] = s._replace(end=t, ended=step.step)
                    break
    return made


def check_e18(trace: EngineTrace) -> Iterator[Violation]:
    bs = trace.workload.config.block_size
    plans = {r.name: r for r in trace.workload.requests}
    moments = _moments(trace)
    for span in spans(trace):
        t = span.start
        blocks = sorted({t.table[p // bs] for p in t.moved if p // bs < len(t.table)})
        what = (
            f"{t.name}'s {t.kind}"
            + (f" job {t.job}" if t.remote else "")
            + (
                f" (started at step {span.started}"
                + (
                    f", reported done at step {span.ended})"
                    if span.end
                    else ", never reported done)"
                )
            )
        )
        if not t.held:
            yield from _unwritten(trace, span, blocks, what)
            continue
        first = _index(moments, span.started, "update" if t.at == "update" else "schedule")
        last = _index(moments, span.ended, "schedule") if span.end else len(moments) - 1
        # an asynchronous load's blocks are its request's alone (an offloading job's: one
        # that did not end in the step that started it)
        exclusive = t.kind == "load" and (
            span.ended != span.started if t.remote else plans[t.name].load > 0
        )
        for step, call, pool in moments[first : last + 1]:
            problem = _held(pool, blocks, t.name, exclusive)
            if problem:
                yield Violation(
                    "E18",
                    step,
                    call,
                    f"{problem} while {what} moves its KV",
                    (t.name,),
                )
                break  # the first moment tells the story


def _unwritten(trace: EngineTrace, span: Span, blocks: list[int], what: str) -> Iterator[Violation]:
    """A transfer whose blocks the engine does not hold (an offloading job: it flushes the
    job before it writes into them again): no step after the one that started it computes
    into them until it ended (one that ended at a step's start, before its forward pass,
    is over for that step)."""
    bs = trace.workload.config.block_size
    end = span.end
    for step in trace.steps:
        over = end is not None and (
            step.step > span.ended or (step.step == span.ended and end.at == "forward")
        )
        if step.step <= span.started or over:
            continue
        for seq in step.scheduled:
            start, stop = span_of(seq)
            written = {
                seq.block_table[p // bs]
                for p in range(start, stop)
                if p // bs < len(seq.block_table)
            }
            hit = sorted(written & set(blocks))
            if hit:
                yield Violation(
                    "E18",
                    step.step,
                    "model runner",
                    f"{seq.name} computes into block {hit[0]} while {what} moves its KV: the "
                    "engine handed the block on without flushing the job first",
                    (span.start.name, seq.name),
                )
                return


def check_e19(trace: EngineTrace) -> Iterator[Violation]:
    if not trace.workload.connector:
        return
    bs = trace.workload.config.block_size
    told: dict[str, int] = {}
    for step in trace.steps:
        for t in step.transfers:
            if t.kind == "finished":
                if t.name in told:
                    yield Violation(
                        "E19",
                        step.step,
                        "request_finished()",
                        f"the connector is told {t.name} finished a second time (first at "
                        f"step {told[t.name]}): request_finished comes once a request",
                        (t.name,),
                    )
                told.setdefault(t.name, step.step)
            elif t.kind == "load" and t.phase == "start":
                pool = step.after_schedule if t.at == "schedule" else step.after_postprocess
                problem = _own_blocks(t, pool, bs)
                if problem:
                    call = "update_state_after_alloc()"
                    yield Violation("E19", step.step, call, problem, (t.name,))
    if trace.failure is not None or not trace.steps:
        return  # the run did not end: E5 or E6 says why
    last = trace.steps[-1]
    final = last.after_postprocess or last.after_schedule
    for name, status in final.status.items():
        if status == "FINISHED" and name not in told:
            yield Violation(
                "E19",
                last.step,
                "end of run",
                f"{name} finished, but the connector was never told (request_finished): "
                "what it holds for it is never released",
                (name,),
            )
    for span in spans(trace):
        if span.end is None:
            yield Violation(
                "E19",
                last.step,
                "end of run",
                f"{span.start.name}'s {span.start.kind} started at step {span.started} had "
                "not ended when the engine stopped stepping: its blocks are held for good",
                (span.start.name,),
            )


def _moments(trace: EngineTrace) -> list[tuple[int, str, Pool]]:
    """The pools in order: after each step's schedule() and after its update."""
    update = trace.traits.update_call
    made: list[tuple[int, str, Pool]] = []
    for step in trace.steps:
        made.append((step.step, "schedule()", step.after_schedule))
        if step.after_postprocess is not None:
            made.append((step.step, update, step.after_postprocess))
    return made


def _index(moments: list[tuple[int, str, Pool]], step: int, at: str) -> int:
    """The moment just after `step`'s `at` call ("schedule" or "update")."""
    for i, (s, call, _) in enumerate(moments):
        if s == step and (at == "schedule" or call != "schedule()"):
            return i
    return len(moments) - 1


def _held(pool: Pool, blocks: list[int], name: str, exclusive: bool) -> str | None:
    free = set(pool.free)
    indexed = {b for _, b in pool.cache_index}
    for b in blocks:
        if not 0 <= b < len(pool.blocks):
            return f"block {b} is not in the pool"
        if pool.blocks[b].ref_count <= 0 or b in free:
            return f"block {b} is free (ref_count {pool.blocks[b].ref_count})"
        if not exclusive:
            continue
        others = [n for n, table in pool.tables.items() if n != name and b in table]
        if others:
            return f"block {b} is in {', '.join(others)}'s block table"
        if b in indexed:
            return f"block {b} is in the prefix cache's index, a hit for any request"
    return None


def _own_blocks(t: Transfer, pool: Pool | None, bs: int) -> str | None:
    """Whether the blocks a load was told to fill are the request's own at those positions."""
    if pool is None:
        return None
    table = pool.tables.get(t.name, ())
    for p in t.moved:
        i = p // bs
        told = t.table[i] if i < len(t.table) else None
        held = table[i] if i < len(table) else None
        if told != held:
            return (
                f"the connector is told to load position {p} of {t.name} into block {told}, "
                f"but {t.name}'s block table holds "
                + (f"block {held} there" if held is not None else "no block there")
            )
    return None
