"""What the checks look at: a trace as a list of calls, each with the state before and after.

Built once per trace and shared by every check, so checking stays linear in the trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from itertools import pairwise

from schedcheck.model.trace import Sample, SeqState, State, Trace
from schedcheck.model.workload import Request

WAITING, RUNNING, FINISHED = "WAITING", "RUNNING", "FINISHED"
EMPTY = State(seqs={}, waiting=(), running=(), finished=(), blocks_used=0, num_preemptions=0)


# The ints CPython keeps one object of: outside them, two equal ints built apart are two
# objects, and `tok is eos_token_id` is false for an eos sampled at run time (issue 38).
SMALL_INTS = range(-5, 257)


def identity_hint(eos: int, step: int) -> str:
    """What a missed eos outside SMALL_INTS most likely means, in one sentence."""
    return (
        f"eos compared with `is`? {eos} sampled at step {step} was not recognised as eos "
        "(an int outside -5..256 can equal eos_token_id without being the same object: "
        "compare with ==)"
    )


@dataclass(frozen=True)
class Transition:
    """One call: `schedule()`, `update()`, or `update() again`; `before` → `after`.

    For `update()`, `schedule` is what the step's `schedule()` returned: what it must apply.
    For `update() again` it is empty: there is nothing left to apply.
    """

    step: int
    call: str
    before: State
    after: State
    schedule: dict[str, int]
    finished: tuple[str, ...] = ()  # what update() returned
    samples: tuple[Sample, ...] = ()
    preempted: tuple[str, ...] = ()  # by schedule(), see `preempted()`

    @property
    def is_schedule(self) -> bool:
        return self.call == "schedule()"


def with_arrivals(state: State, arrivals: list[Request]) -> State:
    """`state` after `add()` of `arrivals`: fresh, WAITING, at the tail of waiting."""
    if not arrivals:
        return state
    seqs = dict(state.seqs)
    for r in arrivals:
        seqs[r.seq_id] = SeqState(WAITING, 0, r.prompt_len, 0, ())
    waiting = state.waiting + tuple(r.seq_id for r in arrivals)
    return State(
        seqs, waiting, state.running, state.finished, state.blocks_used, state.num_preemptions
    )


def preempted(before: State, after: State) -> tuple[str, ...]:
    """Sequences a `schedule()` preempted: running before, and waiting after or restarted.

    A sequence preempted in phase 1 and admitted again in phase 2 of the same step is
    still running, but its num_computed fell back to 0 (spec: recompute).
    """
    out = []
    for seq_id in before.running:
        was, now = before.seqs[seq_id], after.seqs[seq_id]
        if was.status != RUNNING:
            continue
        if now.status == WAITING or now.num_computed == 0 < was.num_computed:
            out.append(seq_id)
    return tuple(out)


@dataclass
class Evidence:
    """A trace under test, and the runs it is compared with (D1, R1) when there are any."""

    trace: Trace
    reference: Trace | None = None
    unconstrained: Trace | None = None
    since: int = 1  # look only at the calls of steps >= since (the earlier ones were checked)
    requests: dict[str, Request] = field(init=False)

    def __post_init__(self) -> None:
        self.requests = {r.seq_id: r for r in self.trace.workload.requests}

    @cached_property
    def arrival_rank(self) -> dict[str, int]:
        """seq_id → its place in arrival order (F1, I5)."""
        return {seq_id: rank for rank, seq_id in enumerate(self.requests)}

    def out_of_order(self, seq_ids: tuple[str, ...]) -> str | None:
        """The first of `seq_ids` not where arrival order puts it; None if all are (F1, I5).

        Duplicates are I6's to report, not an order problem.
        """
        rank = self.arrival_rank
        ranks = [rank[s] for s in seq_ids]
        if all(a <= b for a, b in pairwise(ranks)):
            return None
        fair = sorted(seq_ids, key=rank.__getitem__)
        return next(s for s, f in zip(seq_ids, fair, strict=True) if s != f)

    @cached_property
    def transitions(self) -> list[Transition]:
        """Every call of the trace (from step `since`) in order, with the state before it."""
        out: list[Transition] = []
        steps = self.trace.steps
        state = steps[self.since - 2].last() if self.since > 1 else EMPTY
        arrivals = self.trace.workload.arrivals()
        for step in steps[self.since - 1 :]:
            before = with_arrivals(state, arrivals.get(step.number, []))
            schedule = dict(step.schedule)
            victims = preempted(before, step.scheduled)
            out.append(
                Transition(
                    step.number, "schedule()", before, step.scheduled, schedule, preempted=victims
                )
            )
            update = step.update
            if update is None:
                break  # the run failed in update(): C1 reports it
            out.append(
                Transition(
                    step.number,
                    "update()",
                    step.scheduled,
                    update.after,
                    schedule,
                    update.finished,
                    update.samples,
                )
            )
            state = update.after
            if step.again is not None:
                again = step.again
                out.append(
                    Transition(
                        step.number,
                        "update() again",
                        state,
                        again.after,
                        {},
                        again.finished,
                        again.samples,
                    )
                )
                state = again.after
        return out
