"""The engine checks, E1-E25, on a trace: each with an id, a message and a likely bug.

E1 positions stay inside the sequence; E2 every KV read finds its own prefix's KV
(kv.py); E3 the block pool adds up (blocks.py); E4 the step's budgets;
E5 every request finishes in time; E6 the engine raises nothing; E7 each request's output
equals its output alone; E8 a scheduled sequence's pickled copy carries what the model
runner needs at that step; E9 (off unless asked for) no more than max_num_seqs sequences
are running at once; E10 (vLLM only) recompute preemption takes vLLM's victim and
requeues it at the front; E11 and E12 (vLLM's async scheduling, quiet where no step
overlaps another) tokens in flight are counted right, and no position is computed on a
placeholder the runner holds for one; E13 (a policy, vLLM's) a running request is left out
of a step only when the step has no room for it; E14 (a policy, SGLang's) retraction takes
the running requests with the fewest output tokens and requeues them at the tail; E15 and
E16 (policies, speculative decoding) the drafts scheduled are fresh and the draft metrics
add up; E17 a drafter's lookahead slots lie in the request's blocks; E18 and E19 (a KV
connector's, transfers.py) a transfer's blocks stay the engine's until it ends, and the
connector is told what the scheduler did; E20 and E21 (policies) a request is refused only
by a queue limit, before it ran, and an aborted one is sent nothing more; E22 (a policy)
preemption for priority; E23 (namespaces.py) a request reads cached KV only of its own cache
namespace and LoRA adapter; E24 (logprobs.py) a request asking prompt logprobs computes its
prompt from where it asks them; E25 (adapters.py) a step runs at most as many LoRA adapters
as the server serves at once.

E4, E9 and E10 are policies, not safety: a fork may budget differently by design, so a run
can switch them off (E4) or on (E9, E10) by name, and an engine's adapter may turn them on
for it (vLLM's has all three on). The others cannot be switched off.

As the spec's checks are (invariants/catalogue.py), each is one entry of ENTRIES, at the
end of this module, after the functions it names; CATALOGUE and POLICIES derive from it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import pairwise

from schedcheck.engine.adapters import check_e25
from schedcheck.engine.blocks import check_e3
from schedcheck.engine.kv import check_e2, span
from schedcheck.engine.logprobs import check_e24
from schedcheck.engine.namespaces import check_e23
from schedcheck.engine.runner import Runner
from schedcheck.engine.trace import (
    UNKNOWN,
    Copy,
    DraftStats,
    EngineTrace,
    Pool,
    Progress,
    Scheduled,
)
from schedcheck.engine.transfers import check_e18, check_e19, spans
from schedcheck.engine.workload import EOS, EngineRequest
from schedcheck.invariants.violation import Violation

EngineCheckFunction = Callable[[EngineTrace], Iterator[Violation]]


@dataclass(frozen=True, kw_only=True)
class EngineCheck:
    """One engine check, as invariants/catalogue.py has the spec's: what it says and its code."""

    id: str
    title: str  # the rule in one line, as a failure report shows it
    symptom: str
    likely_bugs: tuple[str, ...]
    function: EngineCheckFunction  # E5 and E6 share one: the failure the driver recorded
    # None for a safety check, always made; for a policy, whether it is made unless a run
    # switches it (E4 on, E9 off).
    policy: bool | None = None


def active(off: frozenset[str] = frozenset(), on: frozenset[str] = frozenset()) -> list[str]:
    """The checks a run makes: every safety check, and the policies on by default or asked
    for, minus those switched off. ValueError for a safety check asked off, or no check."""
    for name in off | on:
        if name not in CATALOGUE:
            raise ValueError(f"no engine check {name!r} (the checks: {', '.join(CATALOGUE)})")
        if name not in POLICIES:
            raise ValueError(
                f"{name} is a safety check, which cannot be switched; only the "
                f"policies {', '.join(POLICIES)} can"
            )
    return [c for c in CATALOGUE if (POLICIES.get(c, True) or c in on) and c not in off]


def check_engine(trace: EngineTrace, checks: list[str] | None = None) -> list[Violation]:
    """The checks (default: `active()`) on the trace; the earliest step first, then by id."""
    chosen = set(active() if checks is None else checks)
    # Each function once, though two checks share it (E5, E6): it reports either.
    functions = dict.fromkeys(c.function for c in ENTRIES if c.id in chosen)
    found = [v for function in functions for v in function(trace)]
    return sorted(found, key=lambda v: (v.step, v.check))


def check_e1(trace: EngineTrace) -> Iterator[Violation]:
    bs = trace.workload.config.block_size
    longest = trace.workload.max_model_len()
    for step in trace.steps:
        names = [s.name for s in step.scheduled]
        if len(set(names)) != len(names):
            yield Violation(
                "E1",
                step.step,
                "schedule()",
                f"a sequence is scheduled twice in one step: {names}",
                tuple(names),
            )
        for seq in step.scheduled:
            start, end = span(seq)
            size = len(seq.token_ids)
            if seq.num_scheduled < 1 or end > size or start < 0:
                yield Violation(
                    "E1",
                    step.step,
                    "schedule()",
                    f"{seq.name} is scheduled for positions {start}..{end - 1} "
                    f"of a sequence of {size} tokens (the runner starts at {start} "
                    f"and computes {seq.num_scheduled})",
                    (seq.name,),
                )
            elif seq.drafts and end != size:
                yield Violation(
                    "E1",
                    step.step,
                    "schedule()",
                    f"{seq.name} is scheduled {seq.drafts} draft token(s), but this step computes "
                    f"positions {start}..{end - 1} of its {size} tokens with them: a draft "
                    "scheduled is computed in its step",
                    (seq.name,),
                )
            elif end - seq.drafts > longest:
                yield Violation(
                    "E1",
                    step.step,
                    "schedule()",
                    f"{seq.name} computes up to position {end - seq.drafts - 1}, past "
                    f"max_model_len {longest}: a sequence never holds more tokens (a session's "
                    "chunks grow it too)",
                    (seq.name,),
                )
            elif len(seq.block_table) * bs < end:
                yield Violation(
                    "E1",
                    step.step,
                    "schedule()",
                    f"{seq.name} computes up to position {end - 1}, but its "
                    f"block table {list(seq.block_table)} covers only "
                    f"{len(seq.block_table) * bs} positions",
                    (seq.name,),
                )


def check_e4(trace: EngineTrace) -> Iterator[Violation]:
    """The step's budgets: its tokens (its draft positions among them, where the engine
    counts them: Traits.drafts_in_budget) and its sequences."""
    config, counted = trace.workload.config, trace.traits.drafts_in_budget
    for step in trace.steps:
        names = [s.name for s in step.scheduled]
        total = sum(s.num_scheduled - (0 if counted else s.drafts) for s in step.scheduled)
        if total > config.max_num_batched_tokens:
            yield Violation(
                "E4",
                step.step,
                "schedule()",
                f"{total} tokens scheduled{'' if counted else ' beside their drafts'}, "
                f"max_num_batched_tokens is {config.max_num_batched_tokens}",
                tuple(names),
            )
        if len(names) > config.max_num_seqs:
            yield Violation(
                "E4",
                step.step,
                "schedule()",
                f"{len(names)} sequences scheduled, max_num_seqs is {config.max_num_seqs}",
                tuple(names),
            )


def check_e9(trace: EngineTrace) -> Iterator[Violation]:
    limit = trace.workload.config.max_num_seqs
    for step in trace.steps:
        running = [n for n, s in step.after_schedule.status.items() if s == "RUNNING"]
        if len(running) > limit:
            scheduled = [s.name for s in step.scheduled]
            yield Violation(
                "E9",
                step.step,
                "schedule()",
                f"{len(running)} sequences are running ({', '.join(running)}), "
                f"max_num_seqs is {limit}; this step scheduled "
                f"{', '.join(scheduled)}",
                tuple(running),
            )
            return  # the first step over the cap tells the story


def check_e10(trace: EngineTrace) -> Iterator[Violation]:
    """vLLM's recompute preemption (Scheduler.schedule, _preempt_request): under fcfs the
    victim is always the tail of the running list (`self.running.pop()`) and goes back to the
    front of the waiting queue (`prepend_request`); under priority it is the running
    request with the largest (priority, arrival_time). Read off the running list after the
    previous step and the statuses after this schedule(). (A session's arrival_time is its
    latest chunk's once applied, `_update_request_as_session`, which the trace does not
    place: where a candidate is a session sent a chunk by then, the priority order is not
    read. A step that starts with a prefix-cache reset is not read either: the reset
    preempted the running requests itself, and what schedule() admits again of them, in
    what order, is its waiting pass's: one whose connector answers "not yet", because a
    transfer of it is still in flight, stays out.)"""
    order = {r.name: i for i, r in enumerate(sorted(trace.workload.requests, key=_arrival))}
    priority = {r.name: r.priority for r in trace.workload.requests}
    chunked = {r.name: r.chunks[0][0] for r in trace.workload.requests if r.chunks}
    priority_policy = trace.workload.config.policy == "priority"
    loads = [s for s in spans(trace) if s.start.kind == "load"]
    for step, _, running, victims, now in _preemptions(trace):
        if priority_policy and any(chunked.get(n, step + 1) <= step for n in running):
            continue
        if step in trace.workload.resets:
            continue
        # a request whose load is in flight, or one skipped before, waits in a queue of its
        # own, taken first (0.2x's skipped_waiting): the victims go to the front of the rest
        loading = {s.start.name for s in loads if s.started <= step <= (s.ended or step) + 1}
        aside = loading | set(now.aside)
        waiting = tuple(n for n in now.waiting if n not in aside)
        problem = _victim_problem(trace, running, victims, waiting, order, priority, aside)
        if problem is not None:
            yield Violation("E10", step, "schedule()", problem, tuple(victims))
            return  # the first wrong preemption tells the story


def _preemptions(trace: EngineTrace) -> Iterator[tuple[int, Pool, list[str], list[str], Pool]]:
    """Per step after the first: the step, the pool before it, the requests running before
    it and not finished by its schedule(), those of them it sent back to waiting (its
    victims), and the pool after its schedule() (E10's, E14's and E22's reading). Running:
    the engine's running list in its order, then any other request whose status is running
    (SGLang's last batch, in flight in its overlap loop: merged into its running batch as
    the next step is scheduled), but one between two chunks of its prefill (SGLang keeps
    its chunked request apart)."""
    previous = None
    chunking: set[str] = set()  # requests whose last chunk ended short of their tokens
    for step in trace.steps:
        now = step.after_schedule
        if previous is not None:
            listed = [
                *previous.running,
                *(n for n, s in previous.status.items() if s == "RUNNING" and n not in chunking),
            ]
            running = [n for n in dict.fromkeys(listed) if now.status.get(n) != "FINISHED"]
            victims = [n for n in running if now.status.get(n) == "WAITING"]
            yield step.step, previous, running, victims, now
        previous = step.after_postprocess or now
        for seq in step.scheduled:
            end = seq.num_cached + seq.num_scheduled
            if end < len(seq.token_ids):
                chunking.add(seq.name)
            else:
                chunking.discard(seq.name)


def _arrival(request: EngineRequest) -> int:
    return request.arrival


def _victim_problem(
    trace: EngineTrace,
    running: list[str],
    victims: list[str],
    waiting: tuple[str, ...],
    order: dict[str, int],
    priority: dict[str, int],
    aside: set[str] | None = None,
) -> str | None:
    """`aside`: requests waiting in a queue of their own (a load in flight), in no order
    E10 reads: a victim admitted into one again in the same schedule() is not requeued."""
    if not victims:
        return None
    k = len(victims)
    if trace.workload.config.policy == "priority":
        key = {n: (priority[n], order[n]) for n in running}
        want = sorted(running, key=lambda n: key[n])[-k:]
        if set(want) != set(victims):
            return (
                f"preempted {', '.join(victims)}, but the running request(s) of the largest "
                f"(priority, arrival) are {', '.join(want)}: "
                + ", ".join(f"{n} {key[n]}" for n in running)
            )
        return None
    if victims != running[-k:]:
        return (
            f"preempted {', '.join(victims)} of the running list {running}: fcfs preempts "
            f"from its tail, {', '.join(running[-k:])}"
        )
    queued = [v for v in victims if v not in (aside or set())]
    if tuple(waiting[: len(queued)]) != tuple(queued):
        return (
            f"preempted {', '.join(victims)}, which must go back to the front of the "
            f"waiting queue, but it is {list(waiting)}"
        )
    return None


def check_failure(trace: EngineTrace) -> Iterator[Violation]:
    """E5 and E6: the run stopped early, as the driver recorded."""
    f = trace.failure
    if f is not None:
        yield Violation(f.check, f.step, f.call, f.message)


def check_e7(trace: EngineTrace) -> Iterator[Violation]:
    if trace.failure is not None:
        return  # the run did not end: E5 or E6 says why
    last = len(trace.steps)
    failed = _failed_for_loads(trace)
    refused = {name for step in trace.steps for name in step.refused}
    for request in trace.workload.requests:
        want = trace.workload.alone(request, trace.traits.turn_keeps_last)
        got = trace.outputs.get(request.name, ())
        if (request.abort or request.name in refused) and got == want[: len(got)]:
            continue  # aborted or refused (E20 judges the refusal): what it produced before
        if request.name in failed and got == want[: len(got)]:
            continue  # failed by the engine for a failed load, as its policy says
        if got != want:
            yield Violation(
                "E7",
                last,
                "end of run",
                f"{request.name} produced {list(got)}; run alone it produces {list(want)}"
                + _ran_on(request, want, got),
                (request.name,),
            )


def _failed_for_loads(trace: EngineTrace) -> set[str]:
    """The requests an engine whose policy fails a request for a failed load may have
    failed (EngineWorkload.load_failure "fail"): those whose load failed, and those it
    finished (told its connector so) in the update that took a failure's report (the
    step's, or where steps overlap the next one's): a request sharing a failed block."""
    if trace.workload.load_failure != "fail":
        return set()
    reported = {s.step for s in trace.steps if any(t.failed for t in s.transfers)}
    return {
        t.name
        for step in trace.steps
        for t in step.transfers
        if t.failed or (t.kind == "finished" and reported & {step.step, step.step - 1})
    }


def _ran_on(request: EngineRequest, want: tuple[int, ...], got: tuple[int, ...]) -> str:
    """Why an output longer than its run alone is wrong, where that is all that differs: it
    went on past what ends it (an engine whose scheduler never learnt the eos token, say)."""
    if len(got) <= len(want) or got[: len(want)] != want:
        return ""
    if want and want[-1] == EOS and not request.ignore_eos:
        return f": it went on past eos ({EOS}), its output {len(want)}"
    if want and want[-1] in request.stop:
        return f": it went on past its stop token {want[-1]}, its output {len(want)}"
    return f": it went on past the {len(want)} tokens it may produce"


def check_e8(trace: EngineTrace) -> Iterator[Violation]:
    """What a tensor-parallel worker reads of its copy (nano-vllm's runner, one generation):
    a prefill its block table, num_cached_tokens (and num_scheduled_tokens where the runner
    reads it), len(seq) and token_ids at the positions computed; a decode its block table,
    len(seq) and last_token (a decode's copy may carry no token_ids at all)."""
    runner = trace.traits.runner
    for step in trace.steps:
        if not step.copies:
            continue  # its Sequence has no __getstate__: its workers get no pickled copies
        for seq, copy in zip(step.scheduled, step.copies, strict=True):
            problem = _copy_problem(runner, step.is_prefill, seq, copy)
            if problem is not None:
                yield Violation(
                    "E8",
                    step.step,
                    "pickle",
                    f"{seq.name}'s pickled copy carries {problem}",
                    (seq.name,),
                )


def _copy_problem(runner: Runner, is_prefill: bool, seq: Scheduled, copy: Copy) -> str | None:
    size = len(seq.token_ids)
    if copy.block_table != seq.block_table:
        return f"block table {copy.block_table}, not {list(seq.block_table)}"
    if copy.num_tokens is not None and copy.num_tokens != size:
        return f"num_tokens {copy.num_tokens}, not {size}"
    if not runner.by_prefill_rule(is_prefill):
        if copy.last_token != seq.token_ids[-1]:
            return (
                f"last_token {copy.last_token}, but this decode step computes position "
                f"{size - 1}, token {seq.token_ids[-1]}"
            )
        return None
    first, second = runner.fields
    theirs = runner.prefill_read(copy.num_cached, copy.num_scheduled, size)
    if theirs is None:
        return f"no {first} or {second}, which the runner reads"
    start, end = span(seq)
    if theirs != (start, end - start):
        said = f"{first} {copy.num_cached}" + (f", {second} {copy.num_scheduled}" if second else "")
        return f"{said}: positions {theirs[0]}..{sum(theirs) - 1}, not {start}..{end - 1}"
    have = copy.token_ids or ()
    # a placeholder (-1) where a token should be is E12's to report; where the scheduler
    # holds one (a draft the worker keeps), whatever the runner holds is its own
    if any(
        p >= len(have)
        or (seq.token_ids[p] != UNKNOWN and have[p] not in (seq.token_ids[p], UNKNOWN))
        for p in range(start, min(end, size))
    ):
        shown = "no tokens" if copy.token_ids is None else f"tokens {list(have)}"
        return (
            f"{shown}, but this step computes positions {start}..{end - 1}: "
            f"{list(seq.token_ids[start:end])}"
        )
    return None


def check_e11(trace: EngineTrace) -> Iterator[Violation]:
    """vLLM's accounting of tokens in flight (async scheduling: `num_output_placeholders`,
    raised in AsyncScheduler._update_after_schedule for each step that samples, lowered in
    _update_request_with_output as each token lands): never negative; never more than the
    tokens the request has in flight (sampled in steps not yet updated, whose output vLLM
    does not drop), running or not (a preempted request's token may still land: 0.2x count
    it until it does, 0.33 zero it at once and count it as stale); and for a running
    request with tokens in flight, num_computed_tokens = the tokens it knows + those in
    flight - 1 (its last token is sampled, not computed). Read after each schedule() and
    update."""
    for step in trace.steps:
        for pool, call in ((step.after_schedule, "schedule()"), (step.after_postprocess, None)):
            if pool is None:
                continue
            for progress in pool.progress:
                problem = _flight_problem(pool, progress)
                if problem is not None:
                    yield Violation(
                        "E11",
                        step.step,
                        call or trace.traits.update_call,
                        f"{progress.name}: {problem}",
                        (progress.name,),
                    )
                    return  # the first wrong count tells the story


def _flight_problem(pool: Pool, p: Progress) -> str | None:
    known = len(pool.tokens.get(p.name, ()))
    if p.placeholders < 0:
        return f"num_output_placeholders is {p.placeholders}"
    if p.placeholders > p.in_flight:
        return (
            f"num_output_placeholders is {p.placeholders}, but it has {p.in_flight} token(s) "
            f"in flight ({pool.status.get(p.name, 'unknown').lower()})"
        )
    if (
        pool.status.get(p.name) == "RUNNING"
        and p.placeholders
        and (p.computed != known + p.placeholders - 1)
    ):
        return (
            f"num_computed_tokens is {p.computed}, but it knows {known} tokens and has "
            f"{p.placeholders} in flight: {known + p.placeholders - 1} are computed"
        )
    return None


def check_e12(trace: EngineTrace) -> Iterator[Violation]:
    """Async scheduling's runner holds -1 for a token it sampled and has not copied back;
    only the last position of a request of the previous batch reads the real token (from
    the device). A step that computes a position whose input the runner holds as -1
    computes on garbage."""
    for step in trace.steps:
        for seq, copy in zip(step.scheduled, step.copies, strict=False):
            start, end = span(seq)
            have = copy.token_ids or ()
            # draft positions are verified, not trusted: a -1 there is vLLM's padding of a
            # decode to 1 + num_speculative_tokens, rejected by the sampler
            own = min(end, len(have), len(seq.own))
            unknown = [p for p in range(start, own) if have[p] == UNKNOWN]
            if unknown:
                yield Violation(
                    "E12",
                    step.step,
                    "model runner",
                    f"{seq.name} computes position(s) {unknown} on an unknown input: the "
                    f"runner holds -1 there (a token sampled on the device, never sent "
                    f"back to it), in {list(have)}",
                    (seq.name,),
                )


def check_e13(trace: EngineTrace) -> Iterator[Violation]:
    """vLLM schedules its running requests first, each as far as the step's budget goes
    (Scheduler.schedule's running pass): one running before the step and still running
    after it is left out only when the step has no room left, in tokens or requests. The
    one exception is async scheduling's: a request whose every remaining token is already
    in flight is not scheduled again (`num_computed_tokens + 2 - num_output_placeholders
    >= num_prompt_tokens + max_tokens`, and max_model_len's `max_model_len - 1 -
    num_computed_tokens` of 0). A drafter whose forward pass takes input rows of the
    step's budget for each request (Traits.draft_inputs), or off the whole budget
    (Traits.token_budget), leaves that much less room. With a KV connector, where one of
    those left out needs for its next step (its token, its drafts and its drafter's
    lookahead) more blocks than the pool has free, the step has no room: vLLM's running pass
    stops there (`break`) and waits for blocks a transfer or a step in flight is about to
    free rather than preempt for them (`has_pending_block_frees`, and "a deferred free will
    not help with immediate allocation", 0.30 on). A model with a state layer (a Mamba
    layer: layers.STATE_KINDS) computes its prefills in chunks that end at a block
    boundary, its last chunk excepted (vLLM's `_mamba_block_aligned_split`): a request
    in its prefill whose share of the room would not reach its next block boundary, nor
    its prefill's end, is left out (its chunk cut to nothing)."""
    config = trace.workload.config
    requests = {r.name: r for r in trace.workload.requests}
    aligned = any(layer.state for layer in trace.workload.hybrid())
    computed: dict[str, int] = {}  # each request's positions computed, as last scheduled
    previous = None
    for step in trace.steps:
        now = step.after_schedule
        if previous is not None and step.schedules:
            names = {s.name for s in step.scheduled}
            total = sum(s.num_scheduled for s in step.scheduled)
            flight = {p.name: p.placeholders for p in now.progress}
            left = [
                n
                for n in previous.running
                if now.status.get(n) == "RUNNING"
                and n not in names
                and len(now.tokens.get(n, ())) - len(requests[n].prompt) + flight.get(n, 0)
                < trace.workload.most(requests[n])
            ]
            # each request scheduled takes its drafter's input rows too, and one more
            # request needs its own (Traits.draft_inputs; vLLM's input_budget)
            rows = total + trace.traits.draft_inputs * (len(names) + 1)
            budget = trace.traits.token_budget or config.max_num_batched_tokens
            room = rows < budget and len(names) < config.max_num_seqs
            if trace.workload.connector and not all(_fits(trace, now, n) for n in left):
                left = []  # the running pass stops at the one it cannot allocate for
            if aligned:  # a prefill chunk that would end short of its next block boundary
                share = budget - rows
                left = [n for n in left if not _cut_to_nothing(trace, now, n, computed, share)]
            if left and room:
                yield Violation(
                    "E13",
                    step.step,
                    "schedule()",
                    f"{', '.join(left)} running, left out of this step, though it scheduled "
                    f"{total} of max_num_batched_tokens {config.max_num_batched_tokens} and "
                    f"{len(names)} of max_num_seqs {config.max_num_seqs} requests"
                    + (f" ({', '.join(sorted(names))})" if names else ": nothing"),
                    tuple(left),
                )
                return  # the first wasted step tells the story
        for seq in step.scheduled:
            computed[seq.name] = seq.num_cached + seq.num_scheduled
        previous = step.after_postprocess or now


def _cut_to_nothing(
    trace: EngineTrace, pool: Pool, name: str, computed: dict[str, int], share: int
) -> bool:
    """Whether `name`, in its prefill (its prompt, or a resumed request's tokens but the
    last), given `share` tokens of the step, would end short of its next block boundary and
    of its prefill's end: a state layer's aligned split cuts its chunk to nothing."""
    bs = trace.workload.config.block_size
    known = len(pool.tokens.get(name, ()))
    prompt = next(len(r.prompt) for r in trace.workload.requests if r.name == name)
    end, c = max(prompt, known - 1), computed.get(name, 0)
    return c < end and c + share < end and (c + share) // bs * bs <= c


def _fits(trace: EngineTrace, pool: Pool, name: str) -> bool:
    """Whether `name`'s next step (its known tokens and those in flight, then one more, its
    drafts and its drafter's lookahead slots) fits its blocks and the pool's free ones."""
    w = trace.workload
    flight = sum(p.placeholders for p in pool.progress if p.name == name)
    slots = len(pool.tokens.get(name, ())) + flight + 1 + w.drafts + w.lookahead
    need = -(-slots // w.config.block_size) - len(pool.tables.get(name, ()))
    return need <= len(pool.free)


def check_e20(trace: EngineTrace) -> Iterator[Violation]:
    """The engine ends a request unasked (EngineStep.refused) only by its queue limit
    (EngineConfig.max_queued), and only a request that has not run: never scheduled,
    nothing streamed. The limit is meant for new arrivals: a request it refuses after it
    ran (a retracted one, requeued) loses the compute it had and, streamed, its answer."""
    ran: set[str] = set()
    streamed: dict[str, int] = {}
    for step in trace.steps:
        for name in step.refused:
            if not trace.workload.config.max_queued:
                yield Violation(
                    "E20",
                    step.step,
                    "process_batch_result()",
                    f"{name} was ended by the engine, unasked, with no queue limit set",
                    (name,),
                )
            elif name in ran:
                said = streamed.get(name, 0)
                yield Violation(
                    "E20",
                    step.step,
                    "process_batch_result()",
                    f"{name} was refused by the queue limit (max_queued "
                    f"{trace.workload.config.max_queued}) after it ran"
                    + (f", {said} output tokens already streamed" if said else "")
                    + ": the limit is meant for new arrivals, and a request that ran (a "
                    "preempted one, requeued) is no arrival",
                    (name,),
                )
        ran |= {seq.name for seq in step.scheduled}
        for name, count in step.streamed:
            streamed[name] = streamed.get(name, 0) + count


def check_e21(trace: EngineTrace) -> Iterator[Violation]:
    """An aborted request streams no more output than it had when its abort was received
    (EngineStep.streamed, where its adapter records it): the abort's step is where the
    engine received it, at its start, and what the request held then is what the pool
    after the last step run before it says (its tokens less its prompt). A token of a
    batch in flight then, or of one run after, is no longer the client's: the finish that
    says aborted carries none. (Output held back from a client that does not stream, and
    sent with the finish, was produced before: it may come then.)"""
    prompts = {r.name: len(r.prompt) for r in trace.workload.requests}
    aborts = {r.name: r.abort for r in trace.workload.requests if r.abort}
    held: dict[str, int] = {}  # output each aborted request held when its abort came
    sent: dict[str, int] = {}
    last: dict[str, tuple[int, ...]] = {}  # the tokens of the pool after the last step run
    for step in trace.steps:
        for name, at in aborts.items():  # read once, off the last pool before its step
            if at <= step.step and name not in held:
                held[name] = max(len(last.get(name, ())) - prompts[name], 0)
        for name, count in step.streamed:
            sent[name] = sent.get(name, 0) + count
            if name not in aborts or step.step < aborts[name]:
                continue
            if sent[name] > held.get(name, 0):
                yield Violation(
                    "E21",
                    step.step,
                    "process_batch_result()",
                    f"{name} was sent {sent[name]} output token(s) in all by step "
                    f"{step.step}, but held {held.get(name, 0)} when its abort was received "
                    f"at step {aborts[name]}: the rest came from a batch in flight then or "
                    "run after",
                    (name,),
                )
                return
        last = (step.after_postprocess or step.after_schedule).tokens


def check_e14(trace: EngineTrace) -> Iterator[Violation]:
    """SGLang's retraction (its recompute preemption, `ScheduleBatch.retract_decode` and
    `_get_decode_retraction_order`, 0.5.23): the victims are the running requests with the
    fewest output tokens, ties going to the longest prompt; each goes back to the tail of
    the waiting queue (`_add_request_to_queue` appends, and fcfs never re-sorts). Read off
    the running list after the previous step and the pools after this step's schedule;
    output counts are those the pool holds after the previous step (SGLang's adapter keeps
    there what SGLang holds, not the tokens in flight). Only a step that runs no prefill
    retracts (`update_running_batch` runs where `get_new_batch_prefill` formed no batch): a
    prefill step's victims, and a step's that a preemption for priority explains, were
    preempted for priority (E22). Retraction by priority (EngineConfig.retract_by_priority:
    `--retraction-policy priority`) takes the worst priority first, then as above."""
    by_name = {r.name: r for r in trace.workload.requests}
    ranks = (
        {r.name: r.priority for r in trace.workload.requests}
        if trace.workload.config.retract_by_priority
        else {}
    )
    prefills = {s.step for s in trace.steps if s.is_prefill}
    refused = {s.step: set(s.refused) for s in trace.steps}
    for step, before, running, victims, now in _preemptions(trace):
        if step in prefills or (
            victims and _priority_problem(trace, step, before, running, victims) is None
        ):
            continue  # preempted for priority (E22), not retracted
        # a victim refused on its way back to the queue is E20's to judge, not in the queue
        waiting = (*now.waiting, *(v for v in victims if v in refused[step]))
        prompts = {n: _turn_prompt(trace, by_name[n], before.tokens.get(n, ())) for n in running}
        problem = _retraction_problem(before, running, victims, waiting, prompts, ranks)
        if problem is not None:
            yield Violation("E14", step, "schedule()", problem, tuple(victims))
            return  # the first wrong retraction tells the story


def _turn_prompt(trace: EngineTrace, request: EngineRequest, tokens: tuple[int, ...]) -> int:
    """The prompt of the turn a request runs: its own, or a session's turn's context (the
    longest that `tokens` hold: an engine that sends a turn as a request of its own, as
    SGLang does, orders it by that request's prompt and output)."""
    if not request.session:
        return len(request.prompt)
    contexts = [len(c) for c, _ in trace.workload.histories(request, trace.traits.turn_keeps_last)]
    return max((n for n in contexts if n <= len(tokens)), default=len(request.prompt))


def _retraction_problem(
    before: Pool,
    running: list[str],
    victims: list[str],
    waiting: tuple[str, ...],
    prompts: dict[str, int],
    ranks: dict[str, int],
) -> str | None:
    """`ranks`: each request's priority where retraction goes by priority (lower values
    first, so the largest retracted first), else empty."""
    if not victims:
        return None

    def key(name: str) -> tuple[int, int, int]:
        output = len(before.tokens.get(name, ())) - prompts[name]
        return -ranks.get(name, 0), output, -prompts[name]

    kept = [n for n in running if n not in victims]
    if kept and max(map(key, victims)) > min(map(key, kept)):
        shown = ", ".join(
            (f"{n} priority {ranks[n]}, " if ranks else f"{n} ")
            + f"{key(n)[1]} output, prompt {-key(n)[2]}"
            for n in running
        )
        first = "the worst priority, then " if ranks else ""
        return (
            f"retracted {', '.join(victims)}, but the running requests of {first}the fewest "
            f"output tokens (ties: the longest prompt) go first: {shown}"
        )
    if set(waiting[len(waiting) - len(victims) :]) != set(victims):
        return (
            f"retracted {', '.join(victims)}, which must go to the tail of the waiting queue, "
            f"but it is {list(waiting)}"
        )
    return None


def check_e22(trace: EngineTrace) -> Iterator[Violation]:
    """Preemption for priority (EngineConfig.preempt_gap; SGLang's `preempt_to_schedule`,
    0.5.23): running requests sent back to waiting for a waiting one of a better priority,
    under the priority policy with a gap set; each victim worse than the best request
    waiting (or arriving) by more than the gap, and none kept running worse than a victim
    (the worst go first). Only a step that runs a prefill admits, so only there is a
    preemption for priority alone; a step that runs none may preempt for priority too
    (SGLang requeues the victims when the request they made room for is not admitted
    after all: `get_new_batch_prefill`), else it retracted (E14)."""
    steps = {s.step: s for s in trace.steps}
    for at, before, running, victims, _ in _preemptions(trace):
        if not victims or not steps[at].is_prefill:
            continue
        problem = _priority_problem(trace, at, before, running, victims)
        if problem is not None:
            yield Violation("E22", at, "schedule()", problem, tuple(victims))
            return


def _priority_problem(
    trace: EngineTrace, at: int, before: Pool, running: list[str], victims: list[str]
) -> str | None:
    """Why `victims`, sent back to waiting at step `at`, are no preemption for priority
    (None: they are one)."""
    config = trace.workload.config
    priority = {r.name: r.priority for r in trace.workload.requests}
    pending = [
        r.name
        for r in trace.workload.requests
        if r.arrival <= at and before.status.get(r.name) not in ("RUNNING", "FINISHED")
    ]
    if config.policy != "priority" or config.preempt_gap < 0 or not pending:
        return (
            f"preempted {', '.join(victims)} with no preemption for priority (policy "
            f"{config.policy}, preempt_gap {config.preempt_gap}; waiting: "
            f"{', '.join(pending) or 'none'})"
        )
    best = min(priority[n] for n in pending)
    close = [v for v in victims if priority[v] - best <= config.preempt_gap]
    if close:
        return (
            f"preempted {', '.join(close)} (priority "
            f"{', '.join(str(priority[v]) for v in close)}) for a waiting request of priority "
            f"{best}: not worse by more than preempt_gap {config.preempt_gap}"
        )
    worst = min(priority[v] for v in victims)
    worse = [k for k in running if k not in victims and priority[k] > worst]
    if worse:
        return (
            f"preempted {', '.join(victims)} but kept {', '.join(worse)} running, of a worse "
            "priority: " + ", ".join(f"{n} {priority[n]}" for n in running)
        )
    return None


def check_e15(trace: EngineTrace) -> Iterator[Violation]:
    """Speculative decoding: the drafts a step schedules for a request are those the
    proposer made for it after its last step (the workload's `propose` of its tokens now, or
    the first of them where the step has room for fewer). Drafts of an older sequence (kept
    across a preemption, or from before a token landed) only cost their verification: the
    output stays right (E7), the step is wasted, so this is a policy."""
    w = trace.workload
    if not w.drafts:
        return
    for step in trace.steps:
        for seq in step.scheduled:
            if not seq.drafts or seq.padded:
                continue
            # the drafts proposed, then placeholders alone where the proposer had fewer
            drafts, fresh = seq.draft_tokens, w.propose(seq.own)
            proposed = seq.proposed
            if proposed != fresh[: len(proposed)] or any(
                t != UNKNOWN for t in drafts[len(proposed) :]
            ):
                yield Violation(
                    "E15",
                    step.step,
                    "schedule()",
                    f"{seq.name} is scheduled the drafts {list(drafts)}, but those proposed for "
                    f"its {len(seq.own)} tokens are {list(fresh)}: stale drafts",
                    (seq.name,),
                )
                return  # the first stale draft tells the story


def check_e16(trace: EngineTrace) -> Iterator[Violation]:
    """Speculative decoding: the engine's own metrics of the drafts an update verified (what
    its servers log: vLLM's SpecDecodingStats) say what can have happened. Greedy
    verification accepts a prefix of a request's drafts: never a negative count, never more
    accepted than drafted, at each draft position no more accepted than at the one before,
    and the counts by position adding up to the totals. Wrong metrics leave every output
    right, so this is a policy."""
    for step in trace.steps:
        s = step.draft_stats
        if s is None:
            continue
        problem = _stats_problem(s)
        if problem is not None:
            yield Violation(
                "E16", step.step, trace.traits.update_call, f"the draft metrics say {problem}", ()
            )
            return  # the first wrong count tells the story


def check_e17(trace: EngineTrace) -> Iterator[Violation]:
    """Speculative decoding with a drafter that runs a forward pass of its own (a draft
    model, EAGLE, MTP: EngineWorkload.lookahead): after a step that samples a request (it
    computes up to its last token), the drafter writes its drafts' KV at the positions
    after the step's last, up to `lookahead` of them, those below max_model_len (vLLM's
    proposers mask the rest). They must lie in blocks the request holds: past its block
    table the runner's slot mapping names whatever block id the row held before, another
    request's draft KV (vLLM: `allocate_slots(num_lookahead_tokens=...)`). Verification
    keeps the outputs right whatever the drafter reads, so this is a policy: on for vLLM,
    which reserves the slots by design."""
    w = trace.workload
    lookahead, bs, cap = w.lookahead, w.config.block_size, w.max_model_len()
    if not lookahead:
        return
    for step in trace.steps:
        for seq in step.scheduled:
            _, end = span(seq)
            if end != len(seq.token_ids) or end >= cap:
                continue  # a prefill chunk short of its end drafts nothing (E1 has the rest)
            need = min(end + lookahead, cap)
            if len(seq.block_table) * bs < need:
                yield Violation(
                    "E17",
                    step.step,
                    "schedule()",
                    f"{seq.name} computes up to position {end - 1} and its drafter then writes "
                    f"the KV of {w.drafts} drafts up to position {need - 1}, but its block "
                    f"table {list(seq.block_table)} covers only {len(seq.block_table) * bs} "
                    "positions: lookahead slots not reserved",
                    (seq.name,),
                )
                return  # the first short table tells the story


def _stats_problem(s: DraftStats) -> str | None:
    said = (
        f"{s.accepted} of {s.drafts} drafts accepted (by position: "
        f"{list(s.accepted_per_position)} of {list(s.drafts_per_position)})"
    )
    if min(s.drafts, s.accepted, *s.drafts_per_position, *s.accepted_per_position, 0) < 0:
        return f"{said}: a negative count"
    if s.accepted > s.drafts or any(
        a > d for a, d in zip(s.accepted_per_position, s.drafts_per_position, strict=False)
    ):
        return f"{said}: more accepted than drafted"
    accepted = s.accepted_per_position
    if any(later > earlier for earlier, later in pairwise(accepted)):
        return f"{said}: a draft accepted after one rejected (verification accepts a prefix)"
    # a count by position the release does not keep is () (DraftStats)
    if (accepted and sum(accepted) != s.accepted) or (
        s.drafts_per_position and sum(s.drafts_per_position) != s.drafts
    ):
        return f"{said}: the counts by position do not add up to the totals"
    return None


ENTRIES: tuple[EngineCheck, ...] = (
    EngineCheck(
        id="E1",
        title="positions scheduled stay inside the sequence",
        symptom="the runner computes positions past the end, or none at all",
        likely_bugs=(
            "num_cached_tokens advanced past a prefix-cache hit, then scheduled from there",
            "a full-prompt cache hit that leaves nothing to compute",
            "a block table too short for the positions computed",
            "a decode at position len(seq), one past its last token",
        ),
        function=check_e1,
    ),
    EngineCheck(
        id="E2",
        title="every KV read finds what that position of that prefix wrote",
        symptom="silently wrong outputs: the model attends to another sequence's or a stale "
        "block's KV",
        likely_bugs=(
            "a prefix-cache hit that trusts a stale hash entry (the block was reused for other "
            "tokens)",
            "a block handed to two sequences at once",
            "KV written to a block the table no longer names",
            "a re-prefill after preemption that recomputes the prompt only: its outputs' KV "
            "is never written again",
        ),
        function=check_e2,
    ),
    EngineCheck(
        id="E3",
        title="the block pool adds up",
        symptom="leaked or double-used KV blocks: capacity shrinks, or two sequences overwrite "
        "each other",
        likely_bugs=(
            "a block freed twice",
            "a cache hit on a free block that is not taken out of the free list",
            "ref_count not raised on a shared block",
            "freed blocks kept cached in a map by hash: a second block of that hash drops the "
            "first from every container",
        ),
        function=check_e3,
    ),
    EngineCheck(
        id="E4",
        title="each step keeps max_num_batched_tokens and max_num_seqs (a policy)",
        symptom="a step larger than the runner was sized for",
        likely_bugs=("a chunk not capped by the budget left", "decode not bounded by max_num_seqs"),
        function=check_e4,
        policy=True,
    ),
    EngineCheck(
        id="E5",
        title="every request finishes within the bound",
        symptom="requests wait forever: a livelock or a lost sequence",
        likely_bugs=(
            "a sequence dropped from both queues",
            "preemption that never lets anyone finish",
        ),
        function=check_failure,
    ),
    EngineCheck(
        id="E6",
        title="the engine raises nothing",
        symptom="the serving loop crashes",
        likely_bugs=("see the message",),
        function=check_failure,
    ),
    EngineCheck(
        id="E7",
        title="every output equals the request's output run alone",
        symptom="users get different text under load",
        likely_bugs=(
            "a re-prefill after preemption whose sampled token is dropped",
            "a re-prefill after preemption that samples at the prompt's last position, not "
            "the sequence's",
            "a token appended to the wrong sequence",
            "a scheduler that copied config.eos before the engine set it",
        ),
        function=check_e7,
    ),
    EngineCheck(
        id="E8",
        title="a scheduled sequence's pickled copy carries what the runner needs",
        symptom="tensor-parallel workers compute on missing or stale tokens",
        likely_bugs=(
            "__getstate__ sends only the last token to a re-prefill after preemption",
            "a field missing from __getstate__",
        ),
        function=check_e8,
    ),
    EngineCheck(
        id="E9",
        title="at most max_num_seqs sequences are running at once (a policy, off unless asked "
        "for: nano-vllm PR #271)",
        symptom="a resident sequence beyond the first max_num_seqs waits while the others decode",
        likely_bugs=(
            "prefill admission counts only the sequences scheduled in this step, not those "
            "already running",
        ),
        function=check_e9,
        policy=False,
    ),
    EngineCheck(
        id="E10",
        title="preemption takes vLLM's victim and requeues it at the front (vLLM only: fcfs the "
        "tail of the running list, priority the largest (priority, arrival_time))",
        symptom="the wrong request is recomputed, or a preempted request waits behind later "
        "ones (starvation under load)",
        likely_bugs=(
            "a preempted request requeued at the tail of the waiting queue",
            "the priority policy's victim chosen by priority alone, or from the head",
        ),
        function=check_e10,
        policy=False,
    ),
    EngineCheck(
        id="E11",
        title="tokens in flight are counted right (async scheduling): never negative, never "
        "more than are in flight, num_computed_tokens = known + in flight - 1",
        symptom="a request scheduled past its tokens, or one step short of them; an assert in "
        "the engine core kills the server",
        likely_bugs=(
            "num_output_placeholders not reset when a request is preempted",
            "a placeholder not resolved when its token lands, or resolved twice",
        ),
        function=check_e11,
    ),
    EngineCheck(
        id="E12",
        title="no position is computed on an input the runner does not hold (async "
        "scheduling's -1 placeholders)",
        symptom="silently wrong outputs: the model reads a placeholder as a token",
        likely_bugs=(
            "a request's in-flight token read from the runner's CPU copy, not the device",
            "a request scheduled past its last known token outside the previous batch",
        ),
        function=check_e12,
    ),
    EngineCheck(
        id="E13",
        title="a running request is left out of a step only when the step has no room for "
        "it (a policy, vLLM's: its running requests are scheduled first)",
        symptom="a wasted step: a request that could decode waits while the step runs below "
        "its budget, or runs nothing",
        likely_bugs=(
            "the running pass stops (`break`) where it should go on to the next request",
            "the index into the running list not moved back after a preemption removed an "
            "earlier request",
        ),
        function=check_e13,
        policy=False,
    ),
    EngineCheck(
        id="E14",
        title="retraction takes SGLang's victims and requeues them at the tail (SGLang only: "
        "the fewest output tokens first, ties the longest prompt)",
        symptom="the wrong request is recomputed, or a retracted request jumps the queue",
        likely_bugs=(
            "the retraction order's key reversed, or taken from the prompt alone",
            "a retracted request put back at the head of the waiting queue",
        ),
        function=check_e14,
        policy=False,
    ),
    EngineCheck(
        id="E15",
        title="the drafts scheduled for a request are the ones proposed for it after its last "
        "step (speculative decoding; a policy)",
        symptom="wasted verification: drafts of an older sequence are computed and rejected",
        likely_bugs=(
            "spec_token_ids not cleared when a request is preempted",
            "drafts proposed after a prefill chunk kept, or drafts of a step not yet updated",
        ),
        function=check_e15,
        policy=False,
    ),
    EngineCheck(
        id="E16",
        title="the engine's speculative-decoding metrics add up (a policy)",
        symptom="the acceptance rate a server logs is wrong: negative, over 100%, or "
        "positions that disagree with the totals",
        likely_bugs=(
            "num_accepted = len(generated) - 1 for a row that returned no token (-1)",
            "padding rows or drafts of a dropped step counted as accepted",
        ),
        function=check_e16,
        policy=False,
    ),
    EngineCheck(
        id="E17",
        title="a drafter's lookahead slots lie in the request's blocks (speculative decoding "
        "with a draft model or head; a policy)",
        symptom="the drafter writes its KV into a block of another request's (or a cached "
        "prefix's): that request's drafts get worse; verification keeps every output right",
        likely_bugs=(
            "allocate_slots called without num_lookahead_tokens on one of its paths (a new "
            "request's prefill)",
            "the lookahead derived from the method in the scheduler, differently from the worker",
        ),
        function=check_e17,
        policy=False,
    ),
    EngineCheck(
        id="E18",
        title="a KV transfer's blocks stay the engine's until it ends (a connector's)",
        symptom="a block freed or handed to another request while the connector still "
        "loads into it or saves from it: the load overwrites another request's KV, or the "
        "store keeps KV that is not the prefix's",
        likely_bugs=(
            "blocks freed when a load in flight ends though the connector asked to keep them "
            "for its save (two reasons to delay a free, one flag)",
            "an aborted request's blocks freed while its asynchronous load still writes them",
            "an asynchronous load's blocks cached before the load is done",
        ),
        function=check_e18,
    ),
    EngineCheck(
        id="E19",
        title="the KV connector is told what the scheduler did",
        symptom="a connector's own state drifts from the scheduler's: a request it never hears "
        "finished, a load into blocks the request does not hold, a transfer left running",
        likely_bugs=(
            "request_finished skipped on one path of finishing (an abort, a failed load) or "
            "called twice",
            "update_state_after_alloc given the blocks allocated this step, not the request's",
            "the engine stops stepping while a save it delayed a free for still runs",
        ),
        function=check_e19,
    ),
    EngineCheck(
        id="E20",
        title="the engine refuses a request unasked only by its queue limit, and only one "
        "that has not run",
        symptom="a request that already ran (a preempted one, requeued) is answered 'queue "
        "full' after its output was streamed: its compute lost, its answer cut",
        likely_bugs=(
            "a preempted request requeued through the same entry as a new arrival, which "
            "checks the queue limit",
        ),
        function=check_e20,
        policy=True,
    ),
    EngineCheck(
        id="E21",
        title="an aborted request streams nothing after its abort was received",
        symptom="a client that cancelled is sent a token more, or a request with no output "
        "shows one before its abort",
        likely_bugs=(
            "the result of a batch in flight appended and streamed before the pending abort "
            "is taken as the finish",
            "an aborted request kept in the next batch and its token streamed",
        ),
        function=check_e21,
        policy=True,
    ),
    EngineCheck(
        id="E22",
        title="preemption for priority takes the worst running requests, each worse than "
        "the admitted request by more than the gap (a policy, on for SGLang)",
        symptom="a request of a good priority is recomputed for a worse one, or for one "
        "barely better; or running requests are preempted where no priority preemption is "
        "configured",
        likely_bugs=(
            "the running requests sorted best first where the worst must go first",
            "the priority difference compared without the threshold, or with its sign "
            "reversed (schedule_low_priority_values_first)",
        ),
        function=check_e22,
        policy=False,
    ),
    EngineCheck(
        id="E23",
        title="a request reads cached KV only where a request of its own cache namespace and "
        "LoRA adapter wrote it (a prompt carrying embeddings: its own KV only)",
        symptom="a client's prompt is served from another namespace's cache: the isolation "
        "it asked for (a salt, an extra key) is broken, though every output is right; or a "
        "request runs on KV another adapter (or the base model), or another prompt's "
        "embeddings, computed: its outputs wrong",
        likely_bugs=(
            "the prefix cache keyed by the tokens alone, the namespace or the adapter left "
            "out of the key or the hash",
            "a match that compares the namespace of the first block only",
            "the namespace and the adapter joined into one key so that two pairs meet",
            "a request whose prompt carries embeddings skipped by the match but its KV "
            "still inserted into the cache under its tokens",
        ),
        function=check_e23,
    ),
    EngineCheck(
        id="E24",
        title="a request asking its prompt's logprobs from a position computes the prompt "
        "from there in its first prefill",
        symptom="a client's prompt logprobs come back short or made up: the positions the "
        "prefix cache supplied have no logits",
        likely_bugs=(
            "the prefix match not capped at the logprob start (logprob_start_len)",
            "the cap applied to the first chunk only, or before the tree's page alignment",
        ),
        function=check_e24,
    ),
    EngineCheck(
        id="E25",
        title="a step runs requests of at most max_adapters LoRA adapters (the base model "
        "one of them where the engine counts it)",
        symptom="a batch with more adapters than the adapter pool has slots: on a GPU the "
        "step fails, or a request runs on another adapter's weights",
        likely_bugs=(
            "the adapters of the running batch left out of the admission's count, or those "
            "admitted earlier in the same step",
            "a request resumed after preemption, or a chunked prefill continued, admitted "
            "without the check",
        ),
        function=check_e25,
    ),
)

CATALOGUE: dict[str, EngineCheck] = {c.id: c for c in ENTRIES}
"""Every engine check by id, E1-E25."""

POLICIES: dict[str, bool] = {c.id: c.policy for c in ENTRIES if c.policy is not None}
"""The checks a run may switch (E4, E9, E10), and whether each is made unless switched (an
adapter turns more on for its engine: Adapter.policies_on)."""
