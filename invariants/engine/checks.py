"""The engine checks, E1-E8, on a trace: each with an id, a message and a likely bug.

E1 positions stay inside the sequence; E2 every KV read finds its own prefix's KV
(invariants/engine/kv.py); E3 the block pool adds up (blocks.py); E4 the step's budgets;
E5 every request finishes in time; E6 the engine raises nothing; E7 each request's output
equals its output alone; E8 a scheduled sequence's pickled copy carries what the model
runner needs at that step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from invariants.engine.blocks import check_e3
from invariants.engine.kv import check_e2, span
from invariants.engine.trace import Copy, EngineTrace
from invariants.violation import CheckInfo, Violation

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
                  "on a shared block")),
        CheckInfo("E4", "each step keeps max_num_batched_tokens and max_num_seqs",
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
    )
}  # fmt: skip


def check_engine(trace: EngineTrace) -> list[Violation]:
    """Every check on the trace; the earliest step first, then by check id."""
    found: list[Violation] = []
    for check in CHECKS.values():
        found += list(check(trace))
    return sorted(found, key=lambda v: (v.step, v.check))


def check_e1(trace: EngineTrace) -> Iterator[Violation]:
    bs = trace.workload.config.block_size
    for step in trace.steps:
        for seq in step.scheduled:
            start, end = span(step, seq)
            size = len(seq.token_ids)
            if seq.num_scheduled < 1 or end > size or start < 0:
                yield Violation("E1", step.step, "schedule()",
                                f"{seq.name} is scheduled for positions {start}..{end - 1} "
                                f"of a sequence of {size} tokens (num_cached_tokens {start}, "
                                f"num_scheduled_tokens {seq.num_scheduled})",
                                (seq.name,))  # fmt: skip
            elif not step.is_prefill and (seq.num_scheduled != 1 or end != size):
                yield Violation("E1", step.step, "schedule()",
                                f"{seq.name} decodes positions {start}..{end - 1}, not its "
                                f"last position {size - 1}", (seq.name,))  # fmt: skip
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
        if len(set(names)) != len(names):
            yield Violation("E4", step.step, "schedule()",
                            f"a sequence is scheduled twice in one step: {names}",
                            tuple(names))  # fmt: skip


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
    for step in trace.steps:
        for seq, copy in zip(step.scheduled, step.copies, strict=True):
            start, end = span(step, seq)
            size, problem = len(seq.token_ids), None
            if copy.block_table != seq.block_table:
                problem = f"block table {copy.block_table}, not {list(seq.block_table)}"
            elif copy.num_cached is not None and copy.num_cached != seq.num_cached:
                problem = f"num_cached_tokens {copy.num_cached}, not {seq.num_cached}"
            else:
                have = _known(copy, len(seq.token_ids))
                if any(have.get(p) != seq.token_ids[p] for p in range(start, min(end, size))):
                    shown = (
                        f"tokens {list(copy.token_ids)}"
                        if copy.token_ids is not None
                        else f"only its last token, {copy.last_token}"
                    )
                    problem = (
                        f"{shown}, but this step computes positions {start}..{end - 1}: "
                        f"{list(seq.token_ids[start:end])}"
                    )
            if problem is not None:
                yield Violation(
                    "E8", step.step, "pickle", f"{seq.name}'s pickled copy carries {problem}",
                    (seq.name,),
                )  # fmt: skip


def _known(copy: Copy, num_tokens: int) -> dict[int, int]:
    """The tokens a copy lets the runner see, by position: all of them, or the last."""
    if copy.token_ids is not None:
        return dict(enumerate(copy.token_ids))
    return {} if copy.last_token is None else {num_tokens - 1: copy.last_token}


CHECKS: dict[str, Callable[[EngineTrace], Iterator[Violation]]] = {
    "E1": check_e1,
    "E2": check_e2,
    "E3": check_e3,
    "E4": check_e4,
    "E5/E6": check_failure,
    "E7": check_e7,
    "E8": check_e8,
}
