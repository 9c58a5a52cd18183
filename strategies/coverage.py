"""Which of the spec's behaviours a workload exercises, as seen by the reference scheduler.

The labels describe the workload, not the implementation under test: the property suite
reports them with `hypothesis.event`, and a test measures how often the strategies reach
each one. Self-preemption is only visible inside phase 1, so the reference is observed
through a subclass that notes which sequence it was growing when it preempted.
"""

from __future__ import annotations

from schedcheck.invariants.liveness import liveness_bound
from schedcheck.model.workload import Workload
from schedcheck.scheduler import Scheduler, Sequence

CHUNKED_PREFILL = "chunked prefill"
PREEMPT_OTHER = "preemption of another"
PREEMPT_SELF = "self-preemption"
READMITTED = "preempted and re-admitted in the same step"
HEAD_OF_LINE = "FCFS head-of-line block"
MAX_SEQS = "max_num_seqs reached"
BUDGET_OUT = "budget exhausted in phase 1"
EOS_FINISH = "finish by eos"
MAX_TOKENS_FINISH = "finish by max_tokens"
MID_RUN_ARRIVAL = "mid-run arrival"
PREEMPTED_TWICE = "a sequence preempted twice"

LABELS = (
    CHUNKED_PREFILL,
    PREEMPT_OTHER,
    PREEMPT_SELF,
    READMITTED,
    HEAD_OF_LINE,
    MAX_SEQS,
    BUDGET_OUT,
    EOS_FINISH,
    MAX_TOKENS_FINISH,
    MID_RUN_ARRIVAL,
    PREEMPTED_TWICE,
)


class _Observed(Scheduler):
    """The reference, noting for each preemption whether the victim was the one growing."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.victims: list[tuple[str, bool]] = []  # (seq_id, preempted itself)
        self._growing: Sequence | None = None

    def _try_grow(self, seq: Sequence, num_tokens: int) -> bool:
        self._growing = seq
        return super()._try_grow(seq, num_tokens)

    def _preempt(self, seq: Sequence) -> None:
        self.victims.append((seq.seq_id, seq is self._growing))
        super()._preempt(seq)


def observe(workload: Workload) -> set[str]:
    """The labels of LABELS that the reference shows on `workload`."""
    return observation(workload)[0]


def observation(workload: Workload) -> tuple[set[str], int]:
    """The labels of LABELS that the reference shows on `workload`, and how many
    preemptions it makes there: what the properties' search aims at (Hypothesis's
    `target`), read off the reference so that every submission is tried on the same
    workloads, and `schedcheck grade` can try exactly what `check` does."""
    config, model = workload.config, workload.model
    eos = config.eos_token_id
    sched = _Observed(
        num_blocks=config.num_blocks,
        block_size=config.block_size,
        max_num_seqs=config.max_num_seqs,
        max_num_batched_tokens=config.max_num_batched_tokens,
        sample_fn=lambda seq: model.next_token(seq.seq_id, tuple(seq.output), eos),
        eos_token_id=eos,
    )
    arrivals = workload.arrivals()
    seen: set[str] = set()
    for step in range(1, liveness_bound(workload) + 1):
        busy = bool(sched.running or sched.waiting)
        for r in arrivals.get(step, []):
            seen.update([MID_RUN_ARRIVAL] if busy else [])
            sched.add(Sequence(r.seq_id, r.prompt_len, r.max_tokens))
        before = len(sched.victims)
        was_running = [seq.seq_id for seq in sched.running]
        schedule = sched.schedule()
        seen |= _schedule_labels(sched, schedule, sched.victims[before:], was_running)
        for seq in sched.update():
            seen.add(EOS_FINISH if seq.output[-1] == eos else MAX_TOKENS_FINISH)
        if step >= workload.last_arrival() and not (sched.running or sched.waiting):
            break
    victims = [seq_id for seq_id, _ in sched.victims]
    if len(victims) != len(set(victims)):
        seen.add(PREEMPTED_TWICE)
    return seen, len(victims)


def _schedule_labels(
    sched: _Observed,
    schedule: dict[str, int],
    victims: list[tuple[str, bool]],
    was_running: list[str],
) -> set[str]:
    seen = set()
    running = {seq.seq_id: seq for seq in sched.running}
    for seq_id, n in schedule.items():
        seq = running[seq_id]
        if seq.num_computed + n < seq.num_tokens:
            seen.add(CHUNKED_PREFILL)
    for seq_id, itself in victims:
        seen.add(PREEMPT_SELF if itself else PREEMPT_OTHER)
        if seq_id in schedule:
            seen.add(READMITTED)
    gone = {seq_id for seq_id, _ in victims}
    phase1 = sum(schedule[s] for s in was_running if s not in gone and s in schedule)
    if phase1 == sched.max_num_batched_tokens:
        # Phase 2 got nothing. (Running sequences left unscheduled never happen in the
        # reference: all but the last running one decode, and len(running) <= budget.)
        seen.add(BUDGET_OUT)
    if sched.waiting:
        if len(sched.running) >= sched.max_num_seqs:
            seen.add(MAX_SEQS)
        elif sum(schedule.values()) < sched.max_num_batched_tokens:
            seen.add(HEAD_OF_LINE)
    return seen
