"""One engine on one workload: run it, check the trace (E1-E12), say what fired in words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from schedcheck.engine import story
from schedcheck.engine.checks import CATALOGUE, check_engine
from schedcheck.engine.layers import Layer
from schedcheck.engine.trace import UNDRIVABLE, EngineStep, EngineTrace
from schedcheck.engine.traits import Traits
from schedcheck.engine.workload import DRAFTERS, EngineRequest, EngineWorkload
from schedcheck.invariants.violation import Violation


class Runs(Protocol):
    """An engine in this process, or in an isolated worker."""

    @property
    def isolation(self) -> str: ...

    @property
    def traits(self) -> Traits: ...

    def run(self, workload: EngineWorkload) -> EngineTrace: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class EngineVerdict:
    trace: EngineTrace
    violations: list[Violation]

    @property
    def ok(self) -> bool:
        return not self.violations

    def report(self) -> str:
        if self.ok:
            return "all checks hold"
        return report(self.violations[0], self.trace)


class Undrivable(Exception):
    """The engine cannot be driven as its adapter drives it (a usage error, exit 2): what it
    lacks."""


def verify_engine(
    engine: Runs, workload: EngineWorkload, checks: list[str] | None = None
) -> EngineVerdict:
    """Run `workload` and make `checks` (default: invariants.engine.checks.active())."""
    trace = engine.run(workload)
    if trace.failure is not None and trace.failure.check == UNDRIVABLE:
        raise Undrivable(
            f"at step {trace.failure.step}, {trace.failure.call}: {trace.failure.message}"
        )
    return EngineVerdict(trace, check_engine(trace, checks))


def report(violation: Violation, trace: EngineTrace) -> str:
    info = CATALOGUE[violation.check]
    w = trace.workload
    lines = [
        str(violation),
        f"  rule ({info.id}): {info.title}",
        f"  symptom: {info.symptom}",
        f"  likely bug: {'; or '.join(info.likely_bugs)}",
        "",
        "workload:",
        *workload_lines(w),
        "",
        f"steps (runner {trace.traits.runner.name}; positions computed, block tables):",
        "| step | events | phase | scheduled | sampled | free blocks after |",
        "|---|---|---|---|---|---|",
    ]
    shown = trace.steps[: violation.step or len(trace.steps)]
    happened: dict[int, list[str]] = {}
    for event in story.events(trace):
        happened.setdefault(event.step, []).append(story.said(event))
    for step in shown:
        scheduled = ", ".join(
            f"{s.name} {s.num_cached}..{s.num_cached + s.num_scheduled - 1} {list(s.block_table)}"
            for s in step.scheduled
        )
        pool = step.after_postprocess or step.after_schedule
        mixed = trace.traits.runner.decode == "mixed"  # no step-wide phase
        phase = "mixed" if mixed else "prefill" if step.is_prefill else "decode"
        if not step.schedules:
            phase = "update only"  # an engine core draining its queue
        cached = f" (cached: {list(pool.cached)})" if pool.cached else ""
        lines.append(
            f"| {step.step} | {'; '.join(happened.get(step.step, [])) or '-'} | {phase} | "
            f"{scheduled or '-'} | {list(step.sampled)} | {list(pool.free)}{cached} |"
        )
    lines.extend(_counters(violation, shown))
    if trace.failure is None:
        outputs = ", ".join(f"{n} {list(o)}" for n, o in trace.outputs.items())
        lines.append(f"\noutputs: {outputs}")
    return "\n".join(lines)


def _layer(layer: Layer) -> str:
    if layer.kind == "window":
        return f"a sliding window of {layer.size} tokens"
    if layer.kind == "chunk":
        return f"chunked local attention in chunks of {layer.size} tokens"
    return "a Mamba layer (its state at block boundaries)"


def workload_lines(w: EngineWorkload) -> list[str]:
    """The workload as the report says it: its config, one line per request, what happens
    to the engine at which step, the model's rule."""
    c = w.config
    return [
        f"  config: num_kvcache_blocks={c.num_blocks} kvcache_block_size={c.block_size} "
        f"max_num_seqs={c.max_num_seqs} max_num_batched_tokens={c.max_num_batched_tokens} "
        f"eos=0 policy={c.policy}"
        + (f" mode={c.mode}" if c.mode else "")
        + (f" max_model_len={c.max_model_len}" if c.max_model_len else "")
        + (f" schedule_conservativeness={c.conservativeness:g}" if c.conservativeness != 1 else "")
        + (f" max_queued={c.max_queued}" if c.max_queued else "")
        + (" mixed" if c.mixed else "")
        + (f" preempt_gap={c.preempt_gap}" if c.preempt_gap >= 0 else "")
        + (" retraction=priority" if c.retract_by_priority else "")
        + (f" max_adapters={c.max_adapters}" if c.max_adapters else ""),
        "  requests:",
        *(f"    {_request(r, w.connector == 'offloading')}" for r in w.requests),
        *(
            [
                "  prefix cache cleared, running requests preempted, at the start of step "
                + ", ".join(map(str, w.resets))
            ]
            if w.resets
            else []
        ),
        *(
            [
                "  the device done before the engine core looked, at step "
                + ", ".join(map(str, w.early))
            ]
            if w.early
            else []
        ),
        f"  model: next token = crc32 of the sequence so far; eos (0) when it is < "
        f"{w.eos_per_16} mod 16, else 1..{w.vocab}",
        *(
            [
                "  layers: full attention, "
                + ", ".join(_layer(layer) for layer in w.hybrid())
                + " (a KV cache group each)"
            ]
            if w.layers
            else []
        ),
        *(
            [
                f"  speculative decoding: up to {w.drafts} drafts a step (num_speculative_tokens),"
                f" each missing {w.draft_miss_per_8} in 8 (EngineWorkload.propose); verified "
                "greedily: the drafts the model agrees with, then one token of its own; "
                f"proposed by {w.drafter}: {DRAFTERS.get(w.drafter, '?')}"
                + (f" ({w.lookahead} lookahead slots, E17)" if w.lookahead else "")
                + (
                    "; drafts after a step by its batch size: "
                    + ", ".join(f"{a}-{b}: {k}" for a, b, k in w.draft_schedule)
                    if w.draft_schedule
                    else ""
                )
            ]
            if w.drafts
            else []
        ),
        *(
            [
                f"  KV connector: offloading, the engine's own, to a tier of {w.offload_blocks} "
                "block(s), empty at the start; its load and store jobs take the steps each "
                f"request says (at least 1); a failed load: {w.load_failure}"
                if w.connector == "offloading"
                else f"  KV connector: {w.connector}, its store holding the prefixes of "
                + (", ".join(str(list(p)) for p in w.stored) or "nothing")
                + f" from the start; loads synchronous unless said; a failed load: {w.load_failure}"
            ]
            if w.connector
            else []
        ),
    ]


def _counters(violation: Violation, steps: tuple[EngineStep, ...]) -> list[str]:
    """The counters the check read (story.counters_read), as the report's lines."""
    read = story.counters_read(violation.seq_ids, steps)
    if read is None:
        return []
    step, read_counters = read
    return ["", f"counters after step {step}:", *(f"  {c.name}: {c.said()}" for c in read_counters)]


def _request(r: EngineRequest, jobs: bool = False) -> str:
    """A request as the report shows it: every field its workload drew (the ones left at
    their defaults are left out)."""
    words = [f"{r.name} prompt {list(r.prompt)} max_tokens {r.max_tokens}"]
    if r.ignore_eos:
        words.append("ignore_eos")
    if r.stream:
        words.append("streamed")
    if r.namespace:
        words.append(f"namespace {r.namespace}")
    if r.adapter:
        words.append(f"LoRA adapter {r.adapter}")
    if r.embeds:
        words.append("its prompt carrying embeddings of its own")
    if r.logprobs_from >= 0:
        words.append(f"prompt logprobs from {r.logprobs_from}")
    if r.priority:
        words.append(f"priority {r.priority}")
    if r.stop:
        words.append(f"stop {list(r.stop)}")
    if r.abort:
        when = "during" if r.abort_in_step else "at"
        words.append(f"aborted {when} step {r.abort}")
    if jobs:  # an offloading connector's: each job of it takes these steps
        words.append(
            f"its offload jobs take {max(r.load, 1)} (load), {max(r.save, 1)} (store) step(s)"
        )
    elif r.load:
        words.append(f"loads asynchronously, done {r.load} step(s) after it starts")
    if r.load_fails:
        words.append(f"its load fails block(s) {list(r.load_fails)} (from the load's first)")
    if r.save and not jobs:
        words.append(f"saved when it finishes, done {r.save} step(s) after")
    if r.lookup_wait:
        words.append(f"its first {r.lookup_wait} lookup(s) answered not yet")
    if r.session:
        sent = ", ".join(f"{list(c)} at step {s}" for s, c in r.chunks)
        words.append(f"a session: chunks {sent}; closed at step {r.closed_at}")
    return " ".join(words) + f" (step {r.arrival})"
