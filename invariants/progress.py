"""Progress between two calls: sampling (I3) and the accounting of every counter (A1)."""

from __future__ import annotations

from collections.abc import Iterator

from schedcheck.invariants.evidence import FINISHED, SMALL_INTS, Evidence, Transition, identity_hint
from schedcheck.invariants.violation import Violation
from schedcheck.model.trace import SeqState


def check_i3(ev: Evidence) -> Iterator[Violation]:
    """I3: 0 <= num_computed <= num_tokens; sample_fn only when they are equal."""
    for t in ev.transitions:
        for sample in t.samples:
            if sample.num_computed != sample.num_tokens:
                yield Violation(
                    "I3",
                    t.step,
                    t.call,
                    f"sample_fn was called for {sample.seq_id} with num_computed "
                    f"{sample.num_computed} and num_tokens {sample.num_tokens}: a token may "
                    "only be sampled once all tokens are computed (not mid-prefill)",
                    (sample.seq_id,),
                )
        for seq_id, s in t.after.seqs.items():
            if not 0 <= s.num_computed <= s.num_tokens:
                yield Violation(
                    "I3",
                    t.step,
                    t.call,
                    f"{seq_id} has num_computed {s.num_computed} and num_tokens {s.num_tokens}: "
                    "0 <= num_computed <= num_tokens must hold",
                    (seq_id,),
                )


def check_a1(ev: Evidence) -> Iterator[Violation]:
    """A1: between two calls every counter moves by exactly what the spec's rules say."""
    for t in ev.transitions:
        yield from _num_tokens(ev, t)
        if t.is_schedule:
            yield from _schedule_accounting(t)
        else:
            yield from _update_accounting(ev, t)


def _num_tokens(ev: Evidence, t: Transition) -> Iterator[Violation]:
    for seq_id, s in t.after.seqs.items():
        expected = ev.requests[seq_id].prompt_len + len(s.output)
        if s.num_tokens != expected:
            yield _a1(
                t,
                seq_id,
                f"{seq_id}.num_tokens is {s.num_tokens}, but prompt_len + len(output) = {expected}",
            )


def _schedule_accounting(t: Transition) -> Iterator[Violation]:
    """schedule() moves queues and blocks; only a preemption may reset num_computed."""
    for seq_id, now in t.after.seqs.items():
        was = t.before.seqs[seq_id]
        if seq_id in t.preempted:
            continue  # I4 and I7 say what a preemption must do
        if now.num_computed != was.num_computed:
            yield _a1(
                t,
                seq_id,
                f"schedule() changed {seq_id}.num_computed from {was.num_computed} to "
                f"{now.num_computed}; only update() advances it, and only preemption resets it",
            )
        elif now.output != was.output:
            yield _a1(
                t,
                seq_id,
                f"schedule() changed {seq_id}.output from {list(was.output)} to "
                f"{list(now.output)}; only update() appends to it",
            )
        elif was.status == FINISHED and now != was:
            yield _a1(t, seq_id, f"schedule() changed finished {seq_id}: {_diff(was, now)}")
    grew = t.after.num_preemptions - t.before.num_preemptions
    if grew != len(t.preempted):
        victims = ", ".join(t.preempted) or "none"
        yield _a1(
            t,
            "",
            f"num_preemptions grew by {grew}, but {len(t.preempted)} sequences were preempted "
            f"({victims}); a victim admitted again in the same step must restart from "
            "num_computed 0",
        )
    if t.after.finished != t.before.finished:
        yield _a1(t, "", "schedule() changed the finished list; only update() finishes")


def _update_accounting(ev: Evidence, t: Transition) -> Iterator[Violation]:
    """update() applies exactly the last schedule(): num_computed += n, sample, finish."""
    eos = ev.trace.workload.config.eos_token_id
    for seq_id, now in t.after.seqs.items():
        was = t.before.seqs[seq_id]
        if seq_id not in t.schedule:
            if now != was:
                yield _a1(
                    t,
                    seq_id,
                    f"update() changed {seq_id}, which {_not_scheduled(t)}: {_diff(was, now)}",
                )
            continue
        n = t.schedule[seq_id]
        if now.num_computed != was.num_computed + n:
            yield _a1(
                t,
                seq_id,
                f"{seq_id} was scheduled with n = {n} from num_computed {was.num_computed}, "
                f"so update() must make it {was.num_computed + n}, but it is "
                f"{now.num_computed} (update() must apply what schedule() decided, from a "
                "record of its own: the dict schedule() returned is the caller's)",
            )
            continue
        complete = now.num_computed == was.num_tokens
        sampled = now.output[:-1] == was.output and len(now.output) == len(was.output) + 1
        if complete and not sampled:
            yield _a1(
                t,
                seq_id,
                f"{seq_id} computed all {was.num_tokens} tokens, so update() must append "
                f"exactly one sampled token, but its output went from {list(was.output)} to "
                f"{list(now.output)}",
            )
            continue
        if not complete and now.output != was.output:
            yield _a1(
                t,
                seq_id,
                f"{seq_id} has computed {now.num_computed} of {was.num_tokens} tokens (a "
                f"prefill chunk), yet its output changed from {list(was.output)} to "
                f"{list(now.output)}",
            )
            continue
        ends = complete and (
            now.output[-1] == eos or len(now.output) >= ev.requests[seq_id].max_tokens
        )
        if ends != (now.status == FINISHED):
            yield _a1(
                t,
                seq_id,
                f"{seq_id} is {now.status} after update() with output {list(now.output)}, "
                f"but {_finish_reason(ev, seq_id, now, eos, t.step)}",
            )
    yield from _finish_lists(t)


def _finish_lists(t: Transition) -> Iterator[Violation]:
    done = [s for s in t.before.running if t.after.seqs[s].status == FINISHED]
    if list(t.finished) != [s for s in t.schedule if s in done]:
        order = [s for s in t.schedule if s in done]
        yield _a1(
            t,
            "",
            f"update() returned {list(t.finished)}, but the sequences it finished, in "
            f"scheduling order, are {order}",
        )
    elif t.after.finished != t.before.finished + t.finished:
        yield _a1(
            t,
            "",
            f"finished went from {list(t.before.finished)} to {list(t.after.finished)}; "
            f"update() must append exactly what it returns, {list(t.finished)}",
        )
    kept = tuple(s for s in t.before.running if s not in done)
    if t.after.running != kept or t.after.waiting != t.before.waiting:
        yield _a1(
            t,
            "",
            f"update() may only remove finished sequences from running: running went from "
            f"{list(t.before.running)} to {list(t.after.running)}, waiting from "
            f"{list(t.before.waiting)} to {list(t.after.waiting)}",
        )
    if t.after.num_preemptions != t.before.num_preemptions:
        yield _a1(t, "", "update() changed num_preemptions; only schedule() preempts")


def _finish_reason(ev: Evidence, seq_id: str, s: SeqState, eos: int | None, step: int) -> str:
    max_tokens = ev.requests[seq_id].max_tokens
    if s.status == FINISHED:
        reason = f"its last token is not eos ({eos}) and it has fewer than {max_tokens} tokens"
    elif s.output[-1] == eos and eos not in SMALL_INTS:
        return f"its last token is eos_token_id {eos}: {identity_hint(eos, step)}"
    elif s.output[-1] == eos:
        reason = f"its last token is eos_token_id {eos}"
    else:
        reason = f"it reached max_tokens = {max_tokens}"
    return (
        f"{reason} (append the token first, then test tok == eos_token_id or "
        "len(output) >= max_tokens)"
    )


def _not_scheduled(t: Transition) -> str:
    if t.call == "update() again":
        return "no schedule() came before this second update()"
    return "the last schedule() did not schedule"


def _diff(was: SeqState, now: SeqState) -> str:
    changes = [
        f"{field} {a!r} -> {b!r}"
        for field, a, b in zip(SeqState._fields, was, now, strict=True)
        if a != b
    ]
    return ", ".join(changes)


def _a1(t: Transition, seq_id: str, message: str) -> Violation:
    return Violation("A1", t.step, t.call, message, (seq_id,) if seq_id else ())
