"""E24, prompt logprobs: a request whose client asks its prompt's logprobs from position p
(EngineRequest.logprobs_from) computes every prompt position from p on in its first
prefill, whatever the prefix cache holds: a cached position's KV is there, its logits are
not (SGLang caps a prefix hit at `logprob_start_len`, `Req._compute_max_prefix_len`).

A hit past p leaves the client's logprobs short, or filled from nothing; the output
tokens stay right, so E7 is quiet. Only the first prefill is held to it: the logprobs are
returned with it, and a re-prefill after preemption may reuse what it likes.
"""

from __future__ import annotations

from collections.abc import Iterator

from schedcheck.engine.trace import EngineTrace
from schedcheck.invariants.violation import Violation

__all__ = ["check_e24"]


def check_e24(trace: EngineTrace) -> Iterator[Violation]:
    asked = {r.name: r.logprobs_from for r in trace.workload.requests if r.logprobs_from >= 0}
    if not asked:
        return
    started: set[str] = set()
    for step in trace.steps:
        for seq in step.scheduled:
            if seq.name in started:
                continue
            started.add(seq.name)
            p = asked.get(seq.name, -1)
            if 0 <= p < seq.num_cached:
                yield Violation(
                    "E24",
                    step.step,
                    "schedule()",
                    f"{seq.name} asks its prompt's logprobs from position {p}, but its first "
                    f"prefill starts at position {seq.num_cached}, over the prefix cache: "
                    f"positions {p}..{seq.num_cached - 1} have no logits to return",
                    (seq.name,),
                )
                return  # the first short prefill tells the story
