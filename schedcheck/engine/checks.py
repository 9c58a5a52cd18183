"""The engine checks, E1-E8, on a trace: each with an id, a message and a likely bug.

E1 positions stay inside the sequence; E2 every KV read finds its own prefix's KV
(invariants/engine/kv.py); E3 the block pool adds up (blocks.py); E4 the step's budgets;
E5 every request finishes in time; E6 the engine raises nothing; E7 each request's output
equals its output alone; E8 a scheduled sequence's pickled copy carries what the model
runner needs at that step; E9 (off unless asked for) no more than max_num_seqs sequences
are running at once.

E4 and E9 are policies, not safety: a fork may budget differently by design, so a run can
switch them off (E4) or on (E9) by name. The others cannot be switched off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from schedcheck.engine.blocks import check_e3
from schedcheck.engine.kv import check_e2, span
from schedcheck.engine.runner import RUNNERS, Runner
from schedcheck.engine.trace import Copy, EngineTrace, Scheduled
from schedcheck.invariants.violation import CheckInfo, Violation

CATALOGUE = {
    c.id: c
    for c in (
        CheckInfo("E1", "positions scheduled stay inside the sequence",
                  "the runner computes positions past the end, or none at all",
                  ("num_cached_tokens advanced past a prefix-cache hit, then scheduled from "
                   "there", "a full-prompt cache hit that leaves nothing to compute",
                   "a block table too short for the positions computed")),
        CheckInfo("E2", "every KV read finds what that position of that prefix wrote",
                  "silently wrong outputs: the model attends to another sequence's or a "
                  "stale block's KV", ("a prefix-cache hit that trusts a stale hash entry "
                  "(the block was reused for other tokens)", "a block handed to two "
                  "sequences at once", "KV written to a block the table no longer names")),
        CheckInfo("E3", "the block pool adds up",
                  "leaked or double-used KV blocks: capacity shrinks, or two sequences "
                  "overwrite each other", ("a block freed twice", "a cache hit on a free "
                  "block that is not taken out of the free list", "ref_count not raised "
                  "on a shared block", "freed blocks kept cached in a map by hash: a "
                  "second block of that hash drops the first from every container")),
        CheckInfo("E4", "each step keeps max_num_batched_tokens and max_num_seqs (a policy)",
                  "a step larger than the runner was sized for", ("a chunk not capped by "
                  "the budget left", "decode not bounded by max_num_seqs")),
        CheckInfo("E5", "every request finishes within the bound",
                  "requests wait forever: a livelock or a lost sequence",
                  ("a sequence dropped from both queues", "preemption that never lets "
                   "anyone finish")),
        CheckInfo("E6", "the engine raises nothing",
                  "the serving loop crashes", ("see the message",)),
        CheckInfo("E7", "every output equals the request's output run alone",
                  "users get different text under load", ("a re-prefill after preemption "
                  "whose sampled token is dropped", "a token appended to the wrong "
                  "sequence")),
        CheckInfo("E8", "a scheduled sequence's pickled copy carries what the runner needs",
                  "tensor-parallel workers compute on missing or stale tokens",
                  ("__getstate__ sends only the last token to a re-prefill after "
                   "preemption", "a field missing from __getstate__")),
        CheckInfo("E9", "at most max_num_seqs sequences are running at once (a policy, off "
                  "unless asked for: nano-vllm PR #271)",
                  "a resident sequence beyond the first max_num_seqs waits while the others "
                  "decode", ("prefill admission counts only the sequences scheduled in this "
                  "step, not those already running",)),
    )
}  # fmt: skip


POLICIES = {"E4": True, "E9": False}  # the checks a run may switch, and their default


def active(off: frozenset[str] = frozenset(), on: frozenset[str] = frozenset()) -> list[str]:
    """The checks a run makes: every safety check, and the policies on by default or asked
    for, minus those switched off. ValueError for a safety check asked off, or no check."""
    for name in off | on:
        if name not in CATALOGUE:
            raise ValueError(f"no engine check {name!r} (the checks: {', '.join(CATALOGUE)})")
        if name not in POLICIES:
            raise ValueError(f"{name} is a safety check, which cannot be switched; only the "
                             f"policies {', '.join(POLICIES)} can")  # fmt: skip
    return [c for c in CATALOGUE if (POLICIES.get(c, True) or c in on) and c not in off]


def check_engine(trace: EngineTrace, checks: list[str] | None = None) -> list[Violation]:
    """The checks (default: `active()`) on the trace; the earliest step first, then by id."""
    chosen = set(active() if checks is None else checks)
    found: list[Violation] = []
    for ids, check in CHECKS.items():
        if set(ids.split("/")) & chosen:
            found += list(check(trace))
    return sorted(found, key=lambda v: (v.step, v.check))


def check_e1(trace: EngineTrace) -> Iterator[Violation]:
    bs = trace.workload.config.block_size
    for step in trace.steps:
        names = [s.name for s in step.scheduled]
        if len(set(names)) != len(names):
            yield Violation("E1", step.step, "schedule()",
                            f"a sequence is scheduled twice in one step: {names}",
                            tuple(names))  # fmt: skip
        for seq in step.scheduled:
            start, end = span(seq)
            size = len(seq.token_ids)
            if seq.num_scheduled < 1 or end > size or start < 0:
                yield Violation("E1", step.step, "schedule()",
                                f"{seq.name} is scheduled for positions {start}..{end - 1} "
                                f"of a sequence of {size} tokens (the runner starts at {start} "
                                f"and computes {seq.num_scheduled})",
                                (seq.name,))  # fmt: skip
            elif len(seq.block_table) * bs < end:
                yield Violation("E1", step.step, "schedule()",
                                f"{seq.name} computes up to position {end - 1}, but its "
                                f"block table {list(seq.block_table)} covers only "
                                f"{len(seq.block_table) * bs} positions", (seq.name,))  # fmt: skip


def check_e4(trace: EngineTrace) -> Iterator[Violation]:
    config = trace.workload.config
    for step in trace.steps:
        names = [s.name for s in step.scheduled]
        total = sum(s.num_scheduled for s in step.scheduled)
        if total > config.max_num_batched_tokens:
            yield Violation("E4", step.step, "schedule()",
                            f"{total} tokens scheduled, max_num_batched_tokens is "
                            f"{config.max_num_batched_tokens}", tuple(names))  # fmt: skip
        if len(names) > config.max_num_seqs:
            yield Violation("E4", step.step, "schedule()",
                            f"{len(names)} sequences scheduled, max_num_seqs is "
                            f"{config.max_num_seqs}", tuple(names))  # fmt: skip


def check_e9(trace: EngineTrace) -> Iterator[Violation]:
    limit = trace.workload.config.max_num_seqs
    for step in trace.steps:
        running = [n for n, s in step.after_schedule.status.items() if s == "RUNNING"]
        if len(running) > limit:
            scheduled = [s.name for s in step.scheduled]
            yield Violation("E9", step.step, "schedule()",
                            f"{len(running)} sequences are running ({', '.join(running)}), "
                            f"max_num_seqs is {limit}; this step scheduled "
                            f"{', '.join(scheduled)}", tuple(running))  # fmt: skip
            return  # the first step over the cap tells the story


def check_failure(trace: EngineTrace) -> Iterator[Violation]:
    """E5 and E6: the run stopped early, as the driver recorded."""
    f = trace.failure
    if f is not None:
        yield Violation(f.check, f.step, f.call, f.message)


def check_e7(trace: EngineTrace) -> Iterator[Violation]:
    if trace.failure is not None:
        return  # the run did not end: E5 or E6 says why
    last = len(trace.steps)
    for request in trace.workload.requests:
        want, got = trace.workload.alone(request), trace.outputs.get(request.name, ())
        if got != want:
            yield Violation("E7", last, "end of run",
                            f"{request.name} produced {list(got)}; run alone it produces "
                            f"{list(want)}", (request.name,))  # fmt: skip


def check_e8(trace: EngineTrace) -> Iterator[Violation]:
    """What a tensor-parallel worker reads of its copy (nano-vllm's runner, one generation):
    a prefill its block table, num_cached_tokens (and num_scheduled_tokens where the runner
    reads it), len(seq) and token_ids at the positions computed; a decode its block table,
    len(seq) and last_token (a decode's copy may carry no token_ids at all)."""
    runner = RUNNERS[trace.runner]
    for step in trace.steps:
        if not step.copies:
            continue  # its Sequence has no __getstate__: its workers get no pickled copies
        for seq, copy in zip(step.scheduled, step.copies, strict=True):
            problem = _copy_problem(runner, step.is_prefill, seq, copy)
            if problem is not None:
                yield Violation(
                    "E8", step.step, "pickle", f"{seq.name}'s pickled copy carries {problem}",
                    (seq.name,),
                )  # fmt: skip


def _copy_problem(runner: Runner, is_prefill: bool, seq: Scheduled, copy: Copy) -> str | None:
    size = len(seq.token_ids)
    if copy.block_table != seq.block_table:
        return f"block table {copy.block_table}, not {list(seq.block_table)}"
    if copy.num_tokens is not None and copy.num_tokens != size:
        return f"num_tokens {copy.num_tokens}, not {size}"
    if not runner.by_prefill_rule(is_prefill):
        if copy.last_token != seq.token_ids[-1]:
            return (f"last_token {copy.last_token}, but this decode step computes position "
                    f"{size - 1}, token {seq.token_ids[-1]}")  # fmt: skip
        return None
    first, second = runner.fields
    if copy.num_cached is None or (runner.span == "count" and copy.num_scheduled is None):
        return f"no {first} or {second}, which the runner reads"
    start, end = span(seq)
    theirs = runner.prefill(copy.num_cached, copy.num_scheduled, size)
    if theirs != (start, end - start):
        said = f"{first} {copy.num_cached}" + (f", {second} {copy.num_scheduled}" if second
                                                else "")  # fmt: skip
        return (f"{said}: positions {theirs[0]}..{sum(theirs) - 1}, not "
                f"{start}..{end - 1}")  # fmt: skip
    have = copy.token_ids or ()
    if any(p >= len(have) or have[p] != seq.token_ids[p] for p in range(start, min(end, size))):
        shown = "no tokens" if copy.token_ids is None else f"tokens {list(have)}"
        return (f"{shown}, but this step computes positions {start}..{end - 1}: "
                f"{list(seq.token_ids[start:end])}")  # fmt: skip
    return None


CHECKS: dict[str, Callable[[EngineTrace], Iterator[Violation]]] = {
    "E1": check_e1,
    "E2": check_e2,
    "E3": check_e3,
    "E4": check_e4,
    "E5/E6": check_failure,
    "E7": check_e7,
    "E8": check_e8,
    "E9": check_e9,
}
