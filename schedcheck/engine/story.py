"""The story of a run, step by step (issue 55): what happened to each request, and the
counters a check reads, as the text report and the page tell them.

Everything here is read off the trace, whatever engine made it: the workload says when a
request arrived, was aborted (and whether between steps or during one), when the prefix
cache was cleared and when the device finished a batch early; the pools after each call say
who was running and waiting (a request running after one step and waiting after the next
was preempted; one computed again from below where it had reached, without a wait between,
was preempted and resumed within one schedule()), who finished (and the outputs say why),
and, where steps overlap (vLLM's async scheduling), each request's progress: the tokens that
landed at a step's update and the step that sampled them, those a schedule() dropped. A feature that
adds a kind of event (drafts, transfers, sessions, KV cache groups) adds it here, from the
trace data it adds (drafts roll a request back without a preemption: they will say so).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from schedcheck.engine.trace import PAUSED, EngineStep, EngineTrace, Pool
from schedcheck.engine.workload import EOS, EngineRequest, EngineWorkload

__all__ = [
    "ABORT",
    "AGAIN",
    "ARRIVE",
    "CHUNK",
    "CLOSE",
    "DROPPED",
    "EARLY",
    "FINISH",
    "GARBAGE",
    "LANDED",
    "LOAD",
    "LOADED",
    "NEXT",
    "PAUSE",
    "PREEMPT",
    "RESET",
    "SAVE",
    "SAVED",
    "TOLD",
    "WAIT",
    "Counters",
    "Event",
    "counters",
    "counters_read",
    "events",
    "finish_reason",
    "said",
]

ARRIVE, ABORT, RESET, PREEMPT, FINISH, EARLY, LANDED, DROPPED, AGAIN = (
    "arrives",
    "aborted",
    "prefix cache cleared",
    "preempted",
    "finishes",
    "device early",
    "tokens landed",
    "tokens in flight dropped",
    "computed again from below",
)
CHUNK, CLOSE, PAUSE, NEXT = (
    "chunk sent",
    "session closed",
    "turn done, waits for its client",
    "turn done, its next chunk waits to run",
)
WAIT = "lookup answered: not yet"
LOAD, LOADED, SAVE, SAVED, TOLD, GARBAGE = (
    "load starts",
    "load done",
    "save starts",
    "save done",
    "connector told it finished",
    "computed on a failed load's KV",
)


class Event(NamedTuple):
    """Something that happened at one step: to a request (`name`), or to the engine (`""`)."""

    step: int
    kind: str
    name: str = ""
    detail: str = ""


def said(event: Event) -> str:
    """An event in words: `r1 preempted (by the reset)`."""
    who = f"{event.name} " if event.name else ""
    return f"{who}{event.kind}" + (f" ({event.detail})" if event.detail else "")


def _after(step: EngineStep) -> Pool:
    return step.after_postprocess or step.after_schedule


def finish_reason(request: EngineRequest, out: tuple[int, ...], workload: EngineWorkload) -> str:
    """Why a request that finished at `step` did, from its outputs: the rule of the model
    and of the workload that ends it."""
    if out and out[-1] == EOS and not request.ignore_eos:
        return "eos"
    if out and out[-1] in request.stop:
        return "stop token"
    if len(out) >= request.max_tokens:
        return "max_tokens"
    if workload.config.max_model_len and len(out) >= workload.most(request):
        return "length cap: max_model_len"
    return "no reason its outputs show"


def events(trace: EngineTrace) -> list[Event]:
    """Every event of the run, in step order (within a step: the engine's, arrivals,
    aborts, preemptions, finishes)."""
    w = trace.workload
    sessions = {r.name for r in w.requests if r.session}
    found: list[Event] = []
    before: Pool | None = None
    reached: dict[str, int] = {}  # the end of what each request computed so far
    flights: dict[str, list[int]] = {}  # the steps each request's tokens in flight were sampled at
    for step in trace.steps:
        n = step.step
        if n in w.resets:
            found.append(Event(n, RESET, "", "at the start of the step, requests running"))
        if n in w.early:
            found.append(Event(n, EARLY, "", "the batch done before the engine core looked"))
        found.extend(Event(n, ARRIVE, r.name) for r in w.requests if r.arrival == n)
        for r in w.requests:
            if r.abort and r.abort < n:
                continue  # its client sends nothing more
            found.extend(Event(n, CHUNK, r.name, str(list(c))) for s, c in r.chunks if s == n)
            if r.session and r.closed_at == n:
                found.append(Event(n, CLOSE, r.name))
        for r in w.requests:
            if r.abort == n:
                when = "during the step" if r.abort_in_step else "before the step"
                found.append(Event(n, ABORT, r.name, when))
        now = _after(step)
        found.extend(_in_flight(n, before, step, flights))
        found.extend(_transfers(n, step, w.config.block_size))
        for seq in step.scheduled:
            # computing again below what it had computed, with no wait between: a reset's
            # preemption and re-admission within the step's schedule(); otherwise a
            # preemption resumed at once, or a count rolled back: said as what it shows
            was = before.status.get(seq.name) if before is not None else None
            had = reached.get(seq.name, 0)
            if seq.num_cached < had and was == "RUNNING":
                if n in w.resets:
                    found.append(
                        Event(n, PREEMPT, seq.name, "by the reset, resumed in the same step")
                    )
                else:
                    found.append(
                        Event(
                            n,
                            AGAIN,
                            seq.name,
                            f"position {seq.num_cached}, it had computed up to {had - 1}: "
                            "preempted and resumed in the same step, or its count rolled back",
                        )
                    )
            # its drafts may be rejected and computed again: where it reached is its own end
            reached[seq.name] = seq.num_cached + seq.num_scheduled - seq.drafts
        for name, status in now.status.items():
            was = before.status.get(name) if before is not None else None
            if (
                was == "RUNNING"
                and status == "WAITING"
                and name in sessions
                and now.tables.get(name)
            ):
                found.append(Event(n, NEXT, name))  # its blocks kept: a turn, no preemption
            elif was == "RUNNING" and status == "WAITING":
                found.append(Event(n, PREEMPT, name, "by the reset" if n in w.resets else ""))
            if status == PAUSED and was != PAUSED:
                found.append(Event(n, PAUSE, name))
            if status == "FINISHED" and was != "FINISHED":
                request = next((r for r in w.requests if r.name == name), None)
                if request is None:
                    continue
                if request.abort and request.abort <= n:
                    continue  # its abort is the event
                if name in step.refused:
                    found.append(Event(n, FINISH, name, "refused by the engine: its queue limit"))
                    continue
                out = trace.outputs.get(name) or now.tokens.get(name, ())[len(request.prompt) :]
                found.append(Event(n, FINISH, name, finish_reason(request, tuple(out), w)))
        before = now
    return found


def _transfers(n: int, step: EngineStep, bs: int) -> list[Event]:
    """A KV connector's transfers at this step: loads and saves started and done (the
    positions they move, the blocks, those that failed), the connector told a request
    finished, and the requests that computed on garbage a failed load left."""
    found = []
    for t in step.transfers:
        moved = f"positions {t.first}..{len(t.tokens) - 1}" if t.moved else "nothing"
        blocks = sorted({t.table[p // bs] for p in t.moved if p // bs < len(t.table)})
        if t.kind == "finished":
            found.append(Event(n, TOLD, t.name, f"blocks {list(t.table)}"))
            continue
        if t.kind == "lookup":
            found.append(Event(n, WAIT, t.name))
            continue
        kind = {("load", "start"): LOAD, ("load", "end"): LOADED, ("save", "start"): SAVE}
        what = kind.get((t.kind, t.phase), SAVED)
        failed = f"; block(s) {list(t.failed)} failed" if t.failed else ""
        # an offloading job: its id, the tier's blocks, and whether it ended before the
        # step's forward pass
        tier = f", tier blocks {list(t.remote)} (job {t.job})" if t.remote else ""
        before = " before the forward pass" if t.phase == "end" and t.at == "forward" else ""
        found.append(Event(n, what, t.name, f"{moved}, blocks {blocks}{tier}{failed}{before}"))
    found.extend(Event(n, GARBAGE, name) for name in step.tainted)
    return found


def _in_flight(
    n: int, before: Pool | None, step: EngineStep, flights: dict[str, list[int]]
) -> list[Event]:
    """Where steps overlap (the pools carry progress): the tokens each request got in
    flight at this step's schedule(), those dropped there (a preemption, a reset), and
    those that landed at its update, named by the step that sampled them (oldest first)."""

    def flying(pool: Pool | None) -> dict[str, int]:
        return {} if pool is None else {p.name: p.in_flight for p in pool.progress}

    was, scheduled = flying(before), flying(step.after_schedule)
    after = flying(step.after_postprocess) if step.after_postprocess is not None else scheduled
    found = []
    for name in sorted(set(was) | set(scheduled) | set(after)):
        queue = flights.setdefault(name, [])
        first, second, third = was.get(name, 0), scheduled.get(name, 0), after.get(name, 0)
        if second < first:
            gone = [queue.pop(0) for _ in range(min(first - second, len(queue)))]
            found.append(Event(n, DROPPED, name, f"sampled at step {_steps(gone)}"))
        queue.extend([n] * max(second - first, 0))
        if third < second:
            gone = [queue.pop(0) for _ in range(min(second - third, len(queue)))]
            found.append(Event(n, LANDED, name, f"sampled at step {_steps(gone)}"))
    return found


def _steps(steps: list[int]) -> str:
    return ", ".join(str(s) for s in sorted(set(steps))) or "?"


class Counters(NamedTuple):
    """One request's counters after one step, as the engine's pools hold them."""

    name: str
    status: str
    known: int  # tokens the engine holds for it (prompt and outputs so far)
    blocks: int  # the length of its block table
    computed: int | None = None  # num_computed_tokens, where steps overlap (vLLM's async)
    placeholders: int | None = None  # num_output_placeholders
    in_flight: int | None = None  # tokens sampled in steps not yet updated

    def said(self) -> str:
        words = [f"{self.status.lower()}", f"{self.known} tokens known", f"{self.blocks} blocks"]
        if self.computed is not None:
            words.append(f"{self.computed} computed")
        if self.placeholders is not None:
            words.append(f"{self.placeholders} placeholders")
        if self.in_flight is not None:
            words.append(f"{self.in_flight} in flight")
        return ", ".join(words)


def counters(pool: Pool) -> dict[str, Counters]:
    """Every request's counters in `pool`, by name."""
    progress = {p.name: p for p in pool.progress}
    found = {}
    for name, status in pool.status.items():
        p = progress.get(name)
        found[name] = Counters(
            name,
            status,
            len(pool.tokens.get(name, ())),
            len(pool.tables.get(name, ())),
            None if p is None else p.computed,
            None if p is None else p.placeholders,
            None if p is None else p.in_flight,
        )
    return found


def counters_read(
    seq_ids: tuple[str, ...], steps: Sequence[EngineStep]
) -> tuple[int, list[Counters]] | None:
    """What a check read: the counters of the requests it names (every request where it
    names none) after the last of `steps`, and that step's number; None for no step."""
    if not steps:
        return None
    every = counters(_after(steps[-1]))
    names = [n for n in seq_ids if n in every] or list(every)
    return steps[-1].step, [every[n] for n in names]
