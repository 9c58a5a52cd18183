"""E23, cache namespaces: a request reads cached KV only where a request of its own
namespace wrote it (EngineRequest.namespace: SGLang's `extra_key`, which keys its radix
tree, `RadixKey._check_compatible`; vLLM's `cache_salt` is of the same kind), and of its
own LoRA adapter (EngineRequest.adapter: an adapter's KV is not the base model's, nor
another adapter's; SGLang joins `lora_id` to the extra key, vLLM hashes the LoRA's name
into each block's hash); a request whose prompt carries embeddings of its own
(EngineRequest.embeds: SGLang's `positional_embed_overrides`, which `init_next_round_input`
matches against nothing and `skip_radix_cache_insert` keeps out of the tree) is a
namespace of its own.

The KV another namespace computed for the same tokens is the same numbers, so no output
changes and E2 stays quiet: what breaks is the isolation a client asked for (a tenant's
prompt served from another tenant's cache, and the timing that tells it). So E23 follows
who last wrote each slot (each step's scheduled positions, through their block tables, as
E2 does) and, for every position a step reads below where its computation starts, asks
whose it was.
"""

from __future__ import annotations

from collections.abc import Iterator

from schedcheck.engine.kv import moved_slots, slot_of, span, table_slot
from schedcheck.engine.trace import EngineTrace
from schedcheck.invariants.violation import Violation

__all__ = ["check_e23"]


def _shown(space: tuple[str, str, str]) -> str:
    """Where a request's KV belongs, as the reports name it."""
    namespace, adapter, own = space
    if own:
        return "its prompt carrying embeddings of its own"
    said = f"namespace {namespace!r}"
    return f"{said}, adapter {adapter!r}" if adapter else said


def check_e23(trace: EngineTrace) -> Iterator[Violation]:
    w = trace.workload
    space = {r.name: (r.namespace, r.adapter, r.name if r.embeds else "") for r in w.requests}
    if not any(any(s) for s in space.values()):
        return
    bs = w.config.block_size
    writer: dict[int, tuple[str, int]] = {}  # slot -> (request, step) that last wrote it
    tier: dict[int, tuple[str, int]] = {}  # an offloading tier's slot -> whose KV it holds
    for step in trace.steps:
        # the transfers that ended by the step's start (a KV connector's): an offloading
        # tier's blocks hold whose KV its store jobs took, and give it back as its load
        # jobs end; an external store's prefixes (the simulated connector's, there from the
        # start) are no request's, so what a load brings from it is the loader's own
        for t in step.transfers:
            if t.phase != "end":
                continue
            if t.remote:
                for s, remote in moved_slots(t, bs):
                    if s is None:
                        continue
                    if t.kind == "load":
                        writer[s] = tier.get(remote, (t.name, step.step))
                    elif s in writer:
                        tier[remote] = writer[s]
            elif t.kind == "load":
                for p in t.moved:
                    if (s := table_slot(t.table, p, bs)) is not None:
                        writer[s] = (t.name, step.step)
        # a step's writes first, as E2 takes them: a request may read KV another computes
        # in the same step (vLLM caches a block as it is scheduled)
        for seq in step.scheduled:
            start, end = span(seq)
            for p in range(start, end):
                if (s := slot_of(seq, p, bs)) is not None:
                    writer[s] = (seq.name, step.step)
        for seq in step.scheduled:
            start, _ = span(seq)
            for q in range(start):
                wrote = writer.get(s) if (s := slot_of(seq, q, bs)) is not None else None
                if wrote is None or space[wrote[0]] == space[seq.name]:
                    continue
                who, when = wrote
                yield Violation(
                    "E23",
                    step.step,
                    "schedule()",
                    f"{seq.name} ({_shown(space[seq.name])}) starts at position {start} over "
                    f"KV it did not compute: position {q} is {who}'s, written at step {when} "
                    f"in {_shown(space[who])}",
                    (seq.name, who),
                )
                return  # the first crossing tells the story
