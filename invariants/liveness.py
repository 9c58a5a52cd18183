"""L1: a feasible workload finishes, within a bound computed from the workload alone."""

from __future__ import annotations

from collections.abc import Iterator

from schedcheck.invariants.evidence import FINISHED, Evidence
from schedcheck.invariants.violation import Violation
from schedcheck.model.workload import Workload, blocks_for


def liveness_bound(workload: Workload) -> int:
    """The last step by which a correct scheduler has finished every request.

    Derivation. Call a step busy if some arrived request is unfinished when it starts.
    1. In a busy step, `running[0]` (after phase 2, if running was empty) is scheduled with
       the full budget B = max_num_batched_tokens: phase 1 starts with it at index 0. If it
       does not fit it preempts `running[-1]` until it does, and it never preempts itself:
       alone it holds at most prompt_len + max_tokens - 1 tokens of KV, which fit by
       feasibility. If running is empty, blocks_used is 0 (I1), so phase 2 admits
       waiting[0] for the same reason, and budget > 0, max_num_seqs >= 1.
    2. Nothing is ever placed before `running[0]` (admission appends, preemption pops the
       end), so it stays `running[0]` until it finishes: every sequence holds that place
       exactly once, for a run of consecutive busy steps.
    3. Holding it with k tokens generated, a sequence needs at most ceil((P + k) / B) steps
       to compute its P + k tokens and sample, then one step per further token:
       ceil((P + k) / B) + (M - k - 1) <= ceil(P / B) + M - 1, for k <= M - 1.
    4. A step that is not busy lies before the last arrival: at most last_arrival - 1.
    So: steps <= last_arrival - 1 + sum over requests of (ceil(P / B) + M - 1).
    """
    budget = workload.config.max_num_batched_tokens
    busy = sum(blocks_for(r.prompt_len, budget) + r.max_tokens - 1 for r in workload.requests)
    return workload.last_arrival() - 1 + busy


def check_l1(ev: Evidence) -> Iterator[Violation]:
    """L1: the run ends with every request finished, within `liveness_bound`."""
    trace = ev.trace
    if trace.failure is not None:
        return  # C1 reports why the run stopped
    final = trace.final()
    if final is not None and final.overrun(trace.workload.max_tokens()):
        return  # the driver ended the run there: A1 reports the end that was missed
    unfinished = [
        r.seq_id
        for r in trace.workload.requests
        if final is None
        or final.seqs.get(r.seq_id, None) is None
        or final.seqs[r.seq_id].status != FINISHED
    ]
    if not unfinished:
        return
    bound = liveness_bound(trace.workload)
    detail = ", ".join(_where(ev, s) for s in unfinished)
    yield Violation(
        "L1",
        len(trace.steps),
        "end of run",
        f"after {len(trace.steps)} steps (the bound for this workload is {bound}) these "
        f"requests have not finished: {detail}",
        tuple(unfinished),
    )


def _where(ev: Evidence, seq_id: str) -> str:
    final = ev.trace.final()
    s = None if final is None else final.seqs.get(seq_id)
    if s is None:
        return f"{seq_id} (never added)"
    return (
        f"{seq_id} ({s.status}, computed {s.num_computed}/{s.num_tokens}, {len(s.output)} tokens)"
    )
