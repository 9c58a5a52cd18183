"""The catalogue of the spec's checks: each of C1, I1-I8, A1, F1, L1, D1 and R1 once.

One entry per check says everything schedcheck knows of it: its id and title, the rule
(as docs/checks.md states it), the spec's symptom and the likely bugs, its grading group,
what it needs besides the trace (the reference's trace for R1, the never-preempting twin's
for D1), whether it looks at every call or only at the end of a run (L1), and the function
that checks it. Every list of ids, the priority order and the grading groups are derived
from here; a new check is one entry here and one function.

The entries are in priority order: when several checks fire at the same call, the one
that explains the most is shown first (C1 I6 I4 I3 I5 I1 I2 I8 A1 I7 F1 D1 L1 R1, as
docs/checks.md says). `row` is the entry's place in the spec's own order (the tables of
docs/checks.md and docs/spec.md: C1, I1-I8, A1, F1, L1, D1, R1), which ids, groups and
reports follow. Two orders, and neither is renumbered when a check is added: a new entry
goes where its priority puts it, with the next row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from schedcheck.invariants.budgets import check_i1, check_i2, check_i7, check_i8
from schedcheck.invariants.contract import check_c1
from schedcheck.invariants.evidence import Evidence
from schedcheck.invariants.liveness import check_l1
from schedcheck.invariants.oracles import check_d1, check_r1
from schedcheck.invariants.preemption import check_i4, check_i5
from schedcheck.invariants.progress import check_a1, check_i3
from schedcheck.invariants.queues import check_f1, check_i6
from schedcheck.invariants.violation import Violation

CheckFunction = Callable[[Evidence], Iterator[Violation]]
"""A check: the violations it finds in the evidence, earliest first (a generator)."""

When = Literal["every call", "end of run"]


@dataclass(frozen=True, kw_only=True)
class Check:
    """One check of the spec: what it says, how it is graded, what it needs, and its code."""

    id: str
    row: int  # its place in the spec's tables of checks, from 1
    title: str  # the rule in one line, as a failure report shows it
    rule: str  # the rule in full, in markdown, as docs/checks.md's table states it
    symptom: str  # the spec's symptom when it breaks
    likely_bugs: tuple[str, ...]
    group: str  # its grading group (`schedcheck grade`, docs/grading.md)
    function: CheckFunction
    # "every call": it looks at every call's result, so a growing trace can be checked call
    # by call (the stateful test); "end of run": only a whole run can break it (L1).
    when: When = "every call"
    needs_reference: bool = False  # the reference's trace of the same workload (R1)
    needs_twin: bool = False  # the trace of the workload with blocks for everything (D1)


ENTRIES: tuple[Check, ...] = (
    Check(
        id="C1",
        row=1,
        title="the implementation keeps the submission contract",
        rule="the implementation keeps the contract: no exception, `schedule()` returns a "
        "`dict` of `str` to `int`, `update()` a `list` of added sequences, queues hold only "
        "added sequences, every field has its type, `sample_fn` is called with an added "
        "sequence",
        symptom="the suite cannot even drive it: an exception, a wrong type or a missing name",
        likely_bugs=(
            "see the message; the contract is docs/contract.md (`schedcheck contract` prints it)",
        ),
        group="contract",
        function=check_c1,
    ),
    Check(
        id="I6",
        row=7,
        title="every sequence is in exactly one of waiting, running, finished",
        rule="every sequence is in exactly one queue, the one its status names; `schedule()` "
        "schedules only running sequences",
        symptom="a request scheduled twice, or scheduled after it finished",
        likely_bugs=("iterating running with a for loop (a preempted sequence is touched)",),
        group="I6",
        function=check_i6,
    ),
    Check(
        id="I4",
        row=5,
        title="preemption resets only num_computed, num_blocks, status; output is kept",
        rule="a preempted sequence keeps its output",
        symptom="output differs from the run without preemption (hardest to find)",
        likely_bugs=("output cleared on preemption",),
        group="I4",
        function=check_i4,
    ),
    Check(
        id="I3",
        row=4,
        title="0 <= num_computed <= num_tokens; sampling only when they are equal",
        rule="`0 <= num_computed <= num_tokens`; `sample_fn` only called when they are equal",
        symptom="sampling mid-prefill: extra tokens, max_tokens reached early",
        likely_bugs=("sample_fn called before the prefill is complete",),
        group="I3",
        function=check_i3,
    ),
    Check(
        id="I5",
        row=6,
        title="a preempted sequence goes to the head of waiting; "
        "waiting is otherwise in arrival order",
        rule="a preempted sequence is at the head of `waiting`; `waiting` is in arrival order",
        symptom="preempted requests starve; order scrambled under load, latency tail explodes",
        likely_bugs=("preempted sequence put at the tail of waiting",),
        group="I5",
        function=check_i5,
    ),
    Check(
        id="I1",
        row=2,
        title="blocks_used == sum(num_blocks of running) <= num_blocks; 0 once all finished",
        rule="`blocks_used == sum(num_blocks of running) <= num_blocks` (so 0 once all finished)",
        symptom="block leak: nothing can be admitted later; or over-allocation, a real OOM",
        likely_bugs=(
            "blocks not freed on finish or preemption",
            "blocks_used and seq.num_blocks changed apart",
        ),
        group="I1",
        function=check_i1,
    ),
    Check(
        id="I2",
        row=3,
        title="sum(schedule().values()) <= max_num_batched_tokens, and every n >= 1",
        rule="`sum(schedule().values()) <= max_num_batched_tokens`, every `n >= 1`",
        symptom="batch over budget: activation memory blows up; n == 0 wastes a row",
        likely_bugs=("the token budget not charged, or charged off by one",),
        group="I2",
        function=check_i2,
    ),
    Check(
        id="I8",
        row=9,
        title="len(running) <= max_num_seqs",
        rule="`len(running) <= max_num_seqs`: the third budget",
        symptom="more sequences running than there are slots: memory and latency beyond the cap",
        likely_bugs=("max_num_seqs ignored, or tested off by one, in phase 2",),
        group="I8",
        function=check_i8,
    ),
    Check(
        id="A1",
        row=10,
        title="accounting: num_computed grows by exactly n, output by one token when all are "
        "computed, num_preemptions by the preemptions, finished by what update() returns",
        rule="accounting between calls: `schedule()` changes no `num_computed` except a "
        "preemption's reset to 0, and no output; `num_preemptions` grows by exactly the number "
        "of preempted sequences; `update()` adds exactly `n` to each scheduled sequence, "
        "appends exactly one token when all tokens are computed and none otherwise, finishes "
        "exactly the sequences whose last token is eos or that reached `max_tokens`, returns "
        "them in scheduling order and appends them to `finished`; a second `update()` changes "
        "nothing; `num_tokens == prompt_len + len(output)`",
        symptom="progress lost or invented between two calls",
        likely_bugs=(
            "num_computed not reset on preemption",
            "update() does not know what was scheduled",
            "testing eos before appending",
            "eos compared with `is` instead of ==",
            "sample_fn called before the prefill is complete",
        ),
        group="accounting",
        function=check_a1,
    ),
    Check(
        id="I7",
        row=8,
        title="KV covers exactly what is computed: a running sequence holds "
        "ceil(tokens / block_size) blocks; waiting and finished ones hold none",
        rule="KV covers exactly what is computed: a running sequence holds "
        "`ceil(k / block_size)` blocks, `k = num_computed` (plus `n` right after a "
        "`schedule()` that gave it `n`); waiting ones hold no blocks and have computed "
        "nothing; finished ones hold no blocks",
        symptom="KV read that was never computed, or blocks grabbed early and needless preemption",
        likely_bugs=(
            "blocks counted on num_tokens instead of num_computed + n",
            "num_computed not reset on preemption",
        ),
        group="I7",
        function=check_i7,
    ),
    Check(
        id="F1",
        row=11,
        title="FCFS: running followed by waiting is always in arrival order",
        rule="FCFS: `running + waiting` is always in arrival order",
        symptom="a request jumps the queue; FCFS broken",
        likely_bugs=(
            "phase 2 uses continue to skip a request that does not fit",
            "preempted sequence put at the tail of waiting",
            "the wrong victim preempted",
        ),
        group="fcfs",
        function=check_f1,
    ),
    Check(
        id="D1",
        row=13,
        title="differential: every output is what the model yields with no scheduler at all, "
        "and a run with blocks for everything never preempts and gives the same outputs",
        rule="every output is at all times a prefix of what the token model generates with no "
        "scheduler, and all of it once finished; the same workload with blocks for every "
        "request at once never preempts and ends with the same outputs",
        symptom="the final output differs from a run that never preempted",
        likely_bugs=(
            "output cleared on preemption",
            "testing eos before appending",
            "num_computed not reset on preemption",
        ),
        group="differential",
        function=check_d1,
        # Every update() is checked against the model's own output; the twin's comparison
        # is at the end of the run, and only where the twin was run.
        needs_twin=True,
    ),
    Check(
        id="L1",
        row=12,
        title="liveness: a feasible workload finishes within the bound derived from it",
        rule="every request finishes within the workload's liveness bound",
        symptom="a request never finishes: the engine hangs or starves it",
        likely_bugs=("blocks leaked", "phase 1 or phase 2 never admits the head of waiting"),
        group="liveness",
        function=check_l1,
        when="end of run",
    ),
    Check(
        id="R1",
        row=14,
        title="lockstep: every step equals the reference's, call by call",
        rule="lockstep: every call returns and leaves exactly what the reference's does",
        symptom="the schedule differs from the spec's, even where every invariant holds",
        likely_bugs=("see the first divergence: the spec's phase 1 / phase 2 rules",),
        group="lockstep",
        function=check_r1,
        needs_reference=True,
    ),
)

PRIORITY: tuple[str, ...] = tuple(check.id for check in ENTRIES)
"""Every id, the most specific explanation first: the order violations are shown in."""

CATALOGUE: dict[str, Check] = {c.id: c for c in sorted(ENTRIES, key=lambda c: c.row)}
"""Every check by id, in the spec's order."""

IDS: tuple[str, ...] = tuple(CATALOGUE)
"""Every id, in the spec's order."""

GROUP_OF: dict[str, str] = {c.id: c.group for c in CATALOGUE.values()}
"""Each check's grading group."""

GROUPS: dict[str, tuple[str, ...]] = {
    group: tuple(c.id for c in CATALOGUE.values() if c.group == group)
    for group in GROUP_OF.values()
}
"""The grading groups of the checks, in the spec's order, each with its checks (the grade
adds the spec's worked examples, a group of no check of its own: grading/grade.py)."""

_RANK = {check: rank for rank, check in enumerate(PRIORITY)}


def priority(check: str) -> int:
    """The place of `check` in PRIORITY, from 0; anything not an id (a group's name, a
    file not named for a check) after every check."""
    return _RANK.get(check, len(PRIORITY))


def ids(where: Callable[[Check], bool]) -> tuple[str, ...]:
    """The ids of the checks `where` holds for, in the spec's order."""
    return tuple(c.id for c in CATALOGUE.values() if where(c))
