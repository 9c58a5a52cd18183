"""Checks against other runs: the model with no scheduler (D1), the reference in lockstep (R1)."""

from __future__ import annotations

from collections.abc import Iterator

from schedcheck.invariants.evidence import FINISHED, SMALL_INTS, Evidence, identity_hint
from schedcheck.invariants.violation import Violation
from schedcheck.model.trace import State, Step, Trace, show_schedule


def check_d1(ev: Evidence) -> Iterator[Violation]:
    """D1: outputs are the model's, token for token, whatever preemption happened.

    Every output is at all times a prefix of what the token model generates with no
    scheduler at all, and is all of it once finished. The same workload with blocks
    enough for everything never preempts and ends with the same outputs.
    """
    workload = ev.trace.workload
    eos = workload.config.eos_token_id
    expected: dict[str, tuple[int, ...]] = {
        r.seq_id: workload.model.generate(r.seq_id, r.max_tokens, eos) for r in workload.requests
    }
    for t in ev.transitions:
        if t.is_schedule:
            continue
        for seq_id, s in t.after.seqs.items():
            was = t.before.seqs[seq_id]
            if s.output == was.output and s.status == was.status:
                continue
            want = expected[seq_id]
            full = s.status == FINISHED
            if s.output != want[: len(s.output)] or (full and s.output != want):
                yield Violation(
                    "D1",
                    t.step,
                    t.call,
                    f"{seq_id}'s output is {list(s.output)}"
                    + (" (finished)" if full else "")
                    + f", but the model, with no scheduler at all, generates {list(want)}"
                    + _past_eos(s.output, want, eos, t.step),
                    (seq_id,),
                )
    if ev.unconstrained is not None:
        yield from _never_preempting_twin(ev.trace, ev.unconstrained)


def _past_eos(output: tuple[int, ...], want: tuple[int, ...], eos: int | None, step: int) -> str:
    """The hint for an output that ran on past the model's eos, where the eos is an int
    that `is` tells from its equal (`identity_hint`); "" otherwise."""
    if eos is None or eos in SMALL_INTS or want[-1:] != (eos,):
        return ""
    return f": {identity_hint(eos, step)}" if output[: len(want)] == want else ""


def _never_preempting_twin(trace: Trace, twin: Trace) -> Iterator[Violation]:
    blocks = twin.workload.config.num_blocks
    where = f"the same workload with num_blocks = {blocks} (enough for every request at once)"
    if twin.failure is not None:
        yield Violation(
            "D1",
            twin.failure.step,
            twin.failure.call,
            f"{where} fails: {twin.failure.message}",
        )
        return
    for step in twin.steps:
        if step.scheduled.num_preemptions:
            yield Violation(
                "D1",
                step.number,
                "schedule()",
                f"{where} preempted: num_preemptions is {step.scheduled.num_preemptions}",
            )
            return
    mine, theirs = trace.final(), twin.final()
    if mine is None or theirs is None:
        return
    for seq_id, s in mine.seqs.items():
        other = theirs.seqs.get(seq_id)
        if other is not None and s.status == other.status == FINISHED and s.output != other.output:
            yield Violation(
                "D1",
                len(trace.steps),
                "end of run",
                f"{seq_id} ends with output {list(s.output)}, but {where} it ends with "
                f"{list(other.output)}",
                (seq_id,),
            )


def check_r1(ev: Evidence) -> Iterator[Violation]:
    """R1: every step equals the reference's, call by call; the first divergence is reported."""
    if ev.reference is None:
        return
    expected, got = ev.reference.steps, ev.trace.steps
    for want, have in zip(expected, got, strict=False):
        divergence = _step_divergence(want, have)
        if divergence is not None:
            call, message = divergence
            yield Violation("R1", have.number, call, message)
            return
    if len(got) != len(expected) and ev.trace.failure is None:
        yield Violation(
            "R1",
            min(len(got), len(expected)) + 1,
            "end of run",
            f"the reference runs this workload in {len(expected)} steps, this implementation "
            f"in {len(got)}",
        )


def _step_divergence(want: Step, have: Step) -> tuple[str, str] | None:
    if want == have:
        return None  # every field equal, so each comparison below is too (the hot path)
    if want.schedule != have.schedule:
        return "schedule()", (
            f"schedule() returned {show_schedule(dict(have.schedule))}; the reference returns "
            f"{show_schedule(dict(want.schedule))}"
        )
    diff = state_divergence(want.scheduled, have.scheduled)
    if diff:
        return "schedule()", f"after schedule(), {diff}"
    pairs = [("update()", want.update, have.update), ("update() again", want.again, have.again)]
    for call, w, h in pairs:
        if w is None or h is None:
            continue  # a failed update() is C1's; a missing second one is the workload's
        if w.finished != h.finished:
            return call, (
                f"{call} returned {list(h.finished)}; the reference returns {list(w.finished)}"
            )
        diff = state_divergence(w.after, h.after)
        if diff:
            return call, f"after {call}, {diff}"
    return None


# A list longer than this is not shown whole: a queue is told by where it differs, a
# workload's requests by their first (verdict/report.py)
LISTED = 12


def _long_lists(field: str, want: tuple[str, ...], have: tuple[str, ...]) -> str:
    """Two long queues (a marathon's thousand finished) told apart in a line."""
    said = f"{field} holds {len(have)} sequences; the reference's holds {len(want)}"
    at = next((i for i, (w, h) in enumerate(zip(want, have, strict=False)) if w != h), None)
    if at is not None:
        said += f"; they differ first at {at}: {have[at]!r}, the reference's {want[at]!r}"
    elif have and want:
        said += f"; each from {have[0]!r}"
    return said


def state_divergence(want: State, have: State) -> str:
    """The first difference between two states, in words ('' if none)."""
    for field in ("waiting", "running", "finished", "blocks_used", "num_preemptions"):
        w, h = getattr(want, field), getattr(have, field)
        if w != h:
            if isinstance(w, tuple) and max(len(w), len(h)) > LISTED:
                return _long_lists(field, w, h)
            show = (lambda x: list(x)) if isinstance(w, tuple) else (lambda x: x)
            return f"{field} is {show(h)}; the reference has {show(w)}"
    for seq_id, w_seq in want.seqs.items():
        h_seq = have.seqs.get(seq_id)
        if h_seq is None or h_seq == w_seq:
            continue
        for name, a, b in zip(w_seq._fields, w_seq, h_seq, strict=True):
            if a != b:
                show = (lambda x: list(x)) if isinstance(a, tuple) else (lambda x: x)
                return f"{seq_id}.{name} is {show(b)}; the reference has {show(a)}"
    return ""
