"""E25, LoRA adapters: a step runs requests of at most `EngineConfig.max_adapters` distinct
adapters (EngineRequest.adapter; the base model one of them where the engine counts it:
Traits.base_is_adapter). An engine keeps the adapters of a batch in a pool of that many
slots (SGLang's LoRA memory pool of `max_loras_per_batch`, its admission asking
`validate_lora_batch`; vLLM's `max_loras`): a batch of more has no slot for one of them,
and on a GPU it fails or runs a request on another's weights.

What an adapter changes in the KV a request computes is E23's (namespaces.py): a request
reads cached KV only of its own namespace and adapter.
"""

from __future__ import annotations

from collections.abc import Iterator

from schedcheck.engine.trace import EngineStep, EngineTrace
from schedcheck.invariants.violation import Violation

__all__ = ["at_limit", "check_e25", "step_adapters"]


def step_adapters(trace: EngineTrace, step: EngineStep) -> set[str]:
    """The adapters of the requests a step computes, the base ("") among them where the
    engine counts it."""
    adapter = {r.name: r.adapter for r in trace.workload.requests}
    used = {adapter[seq.name] for seq in step.scheduled}
    return used if trace.traits.base_is_adapter else used - {""}


def at_limit(trace: EngineTrace, step: EngineStep) -> bool:
    """The step ran as many adapters as the server serves at once, and a request of
    another waited (E25's edge: the admission that keeps to the limit)."""
    limit = trace.workload.config.max_adapters
    used = step_adapters(trace, step)
    if not limit or len(used) < limit:
        return False
    adapter = {r.name: r.adapter for r in trace.workload.requests}
    counted = trace.traits.base_is_adapter
    return any(
        adapter[n] not in used and (adapter[n] or counted) for n in step.after_schedule.waiting
    )


def check_e25(trace: EngineTrace) -> Iterator[Violation]:
    limit = trace.workload.config.max_adapters
    if not limit:
        return
    adapter = {r.name: r.adapter for r in trace.workload.requests}
    for step in trace.steps:
        used = step_adapters(trace, step)
        if len(used) > limit:
            names = ", ".join(f"{s.name} ({adapter[s.name] or 'base'})" for s in step.scheduled)
            counted = " (the base model counted as one)" if trace.traits.base_is_adapter else ""
            yield Violation(
                "E25",
                step.step,
                "schedule()",
                f"the step runs {len(used)} adapters{counted}, over max_adapters {limit}: {names}",
                tuple(s.name for s in step.scheduled),
            )
            return  # the first batch over the limit tells the story
