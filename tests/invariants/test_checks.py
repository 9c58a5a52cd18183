"""Every check fires on a hand-made violating trace and stays quiet on the reference's.

A violating trace is the reference's trace of a small workload with one recorded value
changed, so each test shows exactly which value a check reads. These tests check the
suite itself and do not depend on the implementation under test.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from schedcheck.drive.driver import run
from schedcheck.drive.loader import load_impl
from schedcheck.faults import Failure
from schedcheck.invariants.catalogue import CATALOGUE, PRIORITY
from schedcheck.invariants.checks import CHECKS, check_trace
from schedcheck.invariants.violation import Violation
from schedcheck.model.trace import Sample, Trace
from schedcheck.model.workload import Workload
from tests.helpers import ROOT, reference_trace, replace_step, tamper
from tests.workloads import EOS_SECOND, EXAMPLES, PREEMPT_WITH_QUEUE

EX1, EX2, EX3, EX4 = (reference_trace(EXAMPLES[f"example{i}"]) for i in (1, 2, 3, 4))


def fired(trace: Trace, check: str, reference: Trace | None = None) -> Violation:
    """The one violation `check` reports on `trace`; fails if it stays quiet."""
    twin = run(load_impl(), trace.workload.unconstrained()) if check == "D1" else None
    found = check_trace(trace, reference, twin, only=(check,))
    assert [v.check for v in found] == [check], f"{check} did not fire"
    return found[0]


def with_config(trace: Trace, **fields: int) -> Trace:
    workload = trace.workload
    return replace(trace, workload=replace(workload, config=replace(workload.config, **fields)))


def test_every_check_is_catalogued_and_ranked() -> None:
    assert set(CHECKS) == set(CATALOGUE) == set(PRIORITY)
    assert len(PRIORITY) == len(set(PRIORITY))


@pytest.mark.parametrize(
    "workload",
    [
        *EXAMPLES.values(),
        PREEMPT_WITH_QUEUE,
        EOS_SECOND,
        replace(EXAMPLES["example2"], reupdate=True),
    ],
)
@pytest.mark.parametrize("check", list(CHECKS))
def test_check_is_quiet_on_the_reference(check: str, workload: Workload) -> None:
    trace = reference_trace(workload)
    twin = run(load_impl(), workload.unconstrained())
    assert check_trace(trace, trace, twin, only=(check,)) == []


def test_c1_fires_when_the_run_failed() -> None:
    v = fired(replace(EX1, failure=Failure(2, "schedule()", "raised KeyError: 'a1'")), "C1")
    assert (v.step, v.call, v.message) == (2, "schedule()", "raised KeyError: 'a1'")


def test_i1_fires_on_blocks_used_apart_from_the_sequences() -> None:
    v = fired(tamper(EX1, 1, "update()", blocks_used=4), "I1")
    assert (v.step, v.call) == (1, "update()")
    assert "blocks_used is 4, but the running sequences hold 3" in v.message


def test_i1_fires_on_more_blocks_than_exist() -> None:
    v = fired(with_config(EX2, num_blocks=2), "I1")
    assert "blocks_used is 3, more than num_blocks = 2" in v.message


def test_i2_fires_over_the_token_budget() -> None:
    v = fired(with_config(EX1, max_num_batched_tokens=7), "I2")
    assert (v.step, v.call) == (1, "schedule()")
    assert "{a1: 6, a2: 2}, 8 tokens in all, over max_num_batched_tokens = 7" in v.message


def test_i2_fires_on_n_zero() -> None:
    v = fired(replace_step(EX1, EX1.steps[0], schedule=(("a1", 6), ("a2", 2), ("a3", 0))), "I2")
    assert v.seq_ids == ("a3",)


def test_i3_fires_on_sampling_mid_prefill() -> None:
    step = EX1.steps[0]
    assert step.update is not None
    bad = replace(step.update, samples=(*step.update.samples, Sample("a2", 2, 5)))
    v = fired(replace_step(EX1, step, update=bad), "I3")
    assert "sample_fn was called for a2 with num_computed 2 and num_tokens 5" in v.message


def test_i3_fires_on_num_computed_beyond_num_tokens() -> None:
    v = fired(tamper(EX1, 1, "update()", seq="a2", num_computed=6), "I3")
    assert v.seq_ids == ("a2",)


def test_i4_fires_when_a_victim_loses_its_output() -> None:
    v = fired(tamper(EX2, 2, "schedule()", seq="a2", output=()), "I4")
    assert (v.step, v.seq_ids) == (2, ("a2",))
    assert "from [" in v.message and "to []" in v.message


def test_i5_fires_when_a_victim_goes_to_the_tail() -> None:
    trace = reference_trace(PREEMPT_WITH_QUEUE)
    assert trace.steps[1].scheduled.waiting == ("a2", "a3")
    v = fired(tamper(trace, 2, "schedule()", waiting=("a3", "a2")), "I5")
    assert "a2 was preempted but waiting is ['a3', 'a2']" in v.message


def test_i5_fires_when_waiting_leaves_arrival_order() -> None:
    v = fired(tamper(EX3, 1, "schedule()", waiting=("a3", "a2")), "I5")
    assert "not in arrival order" in v.message


def test_i6_fires_on_a_sequence_in_two_queues() -> None:
    v = fired(tamper(EX1, 1, "schedule()", running=("a1", "a2", "a3")), "I6")
    assert v.message == "a3 is in running and in waiting"


def test_i6_fires_when_a_waiting_sequence_is_scheduled() -> None:
    v = fired(replace_step(EX3, EX3.steps[0], schedule=(("a1", 9), ("a3", 1))), "I6")
    assert "schedule() scheduled a3, which is WAITING, not RUNNING" in v.message


def test_i6_fires_on_a_status_that_disagrees_with_the_queue() -> None:
    v = fired(tamper(EX1, 1, "update()", seq="a1", status="WAITING"), "I6")
    assert v.message == "a1 is in running but its status is WAITING"


def test_i7_fires_on_a_waiting_sequence_that_kept_its_num_computed() -> None:
    v = fired(tamper(EX2, 2, "schedule()", seq="a2", num_computed=3), "I7")
    assert "waiting a2 has num_computed 3" in v.message


def test_i7_fires_on_blocks_counted_on_num_tokens() -> None:
    v = fired(tamper(EX1, 1, "schedule()", seq="a2", num_blocks=2), "I7")
    assert "running a2 holds 2 blocks for num_computed 0 + n 2 = 2 tokens" in v.message
    assert "too many" in v.message


def test_i7_fires_on_a_finished_sequence_holding_blocks() -> None:
    v = fired(tamper(EX1, 2, "update()", seq="a3", num_blocks=1), "I7")
    assert "finished a3 still holds 1 blocks" in v.message


def test_i8_fires_over_max_num_seqs() -> None:
    v = fired(with_config(EX1, max_num_seqs=2), "I8")
    assert (v.step, v.call) == (2, "schedule()")
    assert "running holds 3 sequences ['a1', 'a2', 'a3'], more than max_num_seqs = 2" in v.message


def test_a1_fires_when_update_does_not_apply_n() -> None:
    v = fired(tamper(EX1, 1, "update()", seq="a1", num_computed=5), "A1")
    assert "a1 was scheduled with n = 6 from num_computed 0" in v.message


def test_a1_fires_when_update_returns_the_wrong_list() -> None:
    step = EX1.steps[1]
    assert step.update is not None
    v = fired(replace_step(EX1, step, update=replace(step.update, finished=())), "A1")
    assert "update() returned [], but the sequences it finished" in v.message


def test_a1_fires_on_a_second_update_that_changes_state() -> None:
    trace = reference_trace(replace(EXAMPLES["example1"], reupdate=True))
    step = trace.steps[0]
    assert step.update is not None
    after = step.update.after
    a1 = after.seqs["a1"]._replace(num_computed=7)
    again = replace(step.update, after=replace(after, seqs={**after.seqs, "a1": a1}))
    v = fired(replace_step(trace, step, again=again), "A1")
    assert (v.call, v.seq_ids) == ("update() again", ("a1",))
    assert "no schedule() came before this second update()" in v.message


def test_a1_fires_on_num_preemptions_not_counted() -> None:
    v = fired(tamper(EX2, 2, "schedule()", num_preemptions=0), "A1")
    assert "num_preemptions grew by 0, but 1 sequences were preempted (a2)" in v.message


def test_f1_fires_when_a_request_jumps_the_queue() -> None:
    v = fired(tamper(EX3, 1, "schedule()", running=("a1", "a3"), waiting=("a2",)), "F1")
    assert "a3 is out of place" in v.message


def test_l1_fires_when_requests_never_finish() -> None:
    v = fired(replace(EX1, steps=EX1.steps[:2]), "L1")
    assert v.seq_ids == ("a1", "a2")
    assert "a1 (RUNNING, computed 7/8, 2 tokens)" in v.message


def test_d1_fires_on_a_token_the_model_would_not_give() -> None:
    final = EX2.steps[-1].update
    assert final is not None
    output = final.after.seqs["a2"].output
    v = fired(tamper(EX2, 4, "update()", seq="a2", output=(*output[:-1], output[-1] + 1)), "D1")
    assert v.seq_ids == ("a2",) and "with no scheduler at all" in v.message


def test_d1_fires_when_the_unconstrained_twin_preempts() -> None:
    twin = with_config(EX2, num_blocks=99)  # blocks enough, but it recorded a preemption
    found = check_trace(EX2, None, twin, only=("D1",))
    assert [v.check for v in found] == ["D1"]
    assert "num_blocks = 99 (enough for every request at once) preempted" in found[0].message


def test_r1_fires_at_the_first_divergence() -> None:
    bad = tamper(EX4, 2, "schedule()", seq="a2", num_blocks=2)
    v = fired(bad, "R1", reference=EX4)
    assert (v.step, v.call) == (2, "schedule()")
    assert v.message == "after schedule(), a2.num_blocks is 2; the reference has 0"


def test_r1_fires_on_a_different_schedule() -> None:
    bad = replace_step(EX1, EX1.steps[0], schedule=(("a1", 6),))
    v = fired(bad, "R1", reference=EX1)
    assert v.message == "schedule() returned {a1: 6}; the reference returns {a1: 6, a2: 2}"


def test_violations_come_earliest_first_then_most_specific() -> None:
    bad = tamper(EX2, 2, "schedule()", seq="a2", output=())
    found = check_trace(bad, EX2, None)
    assert found[0].check == "I4"
    steps = [v.step for v in found]
    assert steps == sorted(steps)
    assert {v.check for v in found} >= {"I4", "R1"}


def test_every_check_is_documented() -> None:
    doc = (ROOT / "docs" / "checks.md").read_text()
    assert [c for c in CATALOGUE if f"\n| {c} |" not in doc] == []
