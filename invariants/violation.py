"""What a check says when it fires, and what each check means in the spec's words."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Violation:
    """One broken rule, at one call of one step, in plain words."""

    check: str  # an id of CATALOGUE
    step: int  # from 1; 0 = before the first step (constructing the scheduler)
    call: str  # "schedule()", "update()", "update() again", "end of run", ...
    message: str
    seq_ids: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f"step {self.step}, {self.call}" if self.step else self.call
        return f"{self.check} at {where}: {self.message}"


@dataclass(frozen=True)
class CheckInfo:
    """A check's id and title, the spec's symptom when it breaks, and the bugs behind it."""

    id: str
    title: str
    symptom: str
    likely_bugs: tuple[str, ...]


_SPEC_CHECKS = (
    CheckInfo(
        "C1",
        "the implementation keeps the submission contract",
        "the suite cannot even drive it: an exception, a wrong type or a missing name",
        ("see the message; the contract is docs/contract.md (`schedcheck contract` prints it)",),
    ),
    CheckInfo(
        "I1",
        "blocks_used == sum(num_blocks of running) <= num_blocks; 0 once all finished",
        "block leak: nothing can be admitted later; or over-allocation, a real OOM",
        (
            "blocks not freed on finish or preemption",
            "blocks_used and seq.num_blocks changed apart",
        ),
    ),
    CheckInfo(
        "I2",
        "sum(schedule().values()) <= max_num_batched_tokens, and every n >= 1",
        "batch over budget: activation memory blows up; n == 0 wastes a row",
        ("the token budget not charged, or charged off by one",),
    ),
    CheckInfo(
        "I3",
        "0 <= num_computed <= num_tokens; sampling only when they are equal",
        "sampling mid-prefill: extra tokens, max_tokens reached early",
        ("sample_fn called before the prefill is complete",),
    ),
    CheckInfo(
        "I4",
        "preemption resets only num_computed, num_blocks, status; output is kept",
        "output differs from the run without preemption (hardest to find)",
        ("output cleared on preemption",),
    ),
    CheckInfo(
        "I5",
        "a preempted sequence goes to the head of waiting; waiting is otherwise in arrival order",
        "preempted requests starve; order scrambled under load, latency tail explodes",
        ("preempted sequence put at the tail of waiting",),
    ),
    CheckInfo(
        "I6",
        "every sequence is in exactly one of waiting, running, finished",
        "a request scheduled twice, or scheduled after it finished",
        ("iterating running with a for loop (a preempted sequence is touched)",),
    ),
    CheckInfo(
        "I7",
        "KV covers exactly what is computed: a running sequence holds "
        "ceil(tokens / block_size) blocks; waiting and finished ones hold none",
        "KV read that was never computed, or blocks grabbed early and needless preemption",
        (
            "blocks counted on num_tokens instead of num_computed + n",
            "num_computed not reset on preemption",
        ),
    ),
    CheckInfo(
        "I8",
        "len(running) <= max_num_seqs",
        "more sequences running than there are slots: memory and latency beyond the cap",
        ("max_num_seqs ignored, or tested off by one, in phase 2",),
    ),
    CheckInfo(
        "A1",
        "accounting: num_computed grows by exactly n, output by one token when all are "
        "computed, num_preemptions by the preemptions, finished by what update() returns",
        "progress lost or invented between two calls",
        (
            "num_computed not reset on preemption",
            "update() does not know what was scheduled",
            "testing eos before appending",
            "sample_fn called before the prefill is complete",
        ),
    ),
    CheckInfo(
        "F1",
        "FCFS: running followed by waiting is always in arrival order",
        "a request jumps the queue; FCFS broken",
        (
            "phase 2 uses continue to skip a request that does not fit",
            "preempted sequence put at the tail of waiting",
            "the wrong victim preempted",
        ),
    ),
    CheckInfo(
        "L1",
        "liveness: a feasible workload finishes within the bound derived from it",
        "a request never finishes: the engine hangs or starves it",
        ("blocks leaked", "phase 1 or phase 2 never admits the head of waiting"),
    ),
    CheckInfo(
        "D1",
        "differential: every output is what the model yields with no scheduler at all, "
        "and a run with blocks for everything never preempts and gives the same outputs",
        "the final output differs from a run that never preempted",
        (
            "output cleared on preemption",
            "testing eos before appending",
            "num_computed not reset on preemption",
        ),
    ),
    CheckInfo(
        "R1",
        "lockstep: every step equals the reference's, call by call",
        "the schedule differs from the spec's, even where every invariant holds",
        ("see the first divergence: the spec's phase 1 / phase 2 rules",),
    ),
)

CATALOGUE: dict[str, CheckInfo] = {info.id: info for info in _SPEC_CHECKS}

# When several checks fire at the same call, the most specific explanation is shown first.
PRIORITY: tuple[str, ...] = tuple(
    ["C1", "I6", "I4", "I3", "I5", "I1", "I2", "I8", "A1", "I7", "F1", "D1", "L1", "R1"]
)
