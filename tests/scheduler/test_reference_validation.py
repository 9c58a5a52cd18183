"""The reference's own bad-input rules: a ValueError naming the field and value, no state change.

Submissions are never asked to validate (the contract is silent), so these run on the
reference alone, not on `--impl`.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schedcheck import scheduler
from schedcheck.model.workload import Config
from schedcheck.scheduler import Scheduler, Sequence, SequenceStatus
from schedcheck.strategies import invalid
from schedcheck.strategies.workloads import configs
from tests.helpers import create_requests, create_scheduler, ids

CONFIG_FIELDS = ("num_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens")
NOT_POSITIVE_INTS = (0, -1, True, False, 2.0, "4", None)


def state(sched: Scheduler) -> tuple[Any, ...]:
    """Everything a rejected call must leave as it was."""
    seqs = [*sched.waiting, *sched.running, *sched.finished]
    return (
        ids(sched.waiting),
        ids(sched.running),
        ids(sched.finished),
        sched.blocks_used,
        sched.num_preemptions,
        [(s.status, s.num_computed, s.num_blocks, list(s.output)) for s in seqs],
    )


@pytest.mark.parametrize("field", CONFIG_FIELDS)
@pytest.mark.parametrize("value", NOT_POSITIVE_INTS)
def test_scheduler_rejects_non_positive_int(field: str, value: object) -> None:
    with pytest.raises(
        ValueError, match=rf"^{field} must be a positive int, got {re.escape(repr(value))}$"
    ):
        create_scheduler(scheduler, **{field: value})


def test_scheduler_rejects_uncallable_sample_fn() -> None:
    with pytest.raises(ValueError, match=r"^sample_fn must be callable, got 7$"):
        create_scheduler(scheduler, sample_fn=7)


@pytest.mark.parametrize("value", [True, 1.0, "0"])
def test_scheduler_rejects_non_int_eos(value: object) -> None:
    with pytest.raises(
        ValueError, match=rf"^eos_token_id must be an int or None, got {re.escape(repr(value))}$"
    ):
        create_scheduler(scheduler, eos_token_id=value)


@pytest.mark.parametrize("eos", [None, 0, 7])
def test_scheduler_accepts_eos_none_and_any_int(eos: int | None) -> None:
    assert create_scheduler(scheduler, eos_token_id=eos).eos_token_id == eos


@pytest.mark.parametrize("seq_id", ["", 1, None, b"a1"])
def test_sequence_rejects_bad_seq_id(seq_id: object) -> None:
    with pytest.raises(
        ValueError, match=rf"^seq_id must be a non-empty str, got {re.escape(repr(seq_id))}$"
    ):
        Sequence(seq_id=seq_id, prompt_len=1, max_tokens=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["prompt_len", "max_tokens"])
@pytest.mark.parametrize("value", NOT_POSITIVE_INTS)
def test_sequence_rejects_non_positive_int(field: str, value: object) -> None:
    kwargs: dict[str, Any] = {"seq_id": "a1", "prompt_len": 1, "max_tokens": 1, field: value}
    with pytest.raises(
        ValueError, match=rf"^{field} must be a positive int, got {re.escape(repr(value))}$"
    ):
        Sequence(**kwargs)


def test_fresh_sequence_has_contract_defaults() -> None:
    seq = Sequence(seq_id="a1", prompt_len=5, max_tokens=2)
    assert (seq.output, seq.num_computed, seq.num_blocks, seq.status, seq.num_tokens) == (
        [],
        0,
        0,
        SequenceStatus.WAITING,
        5,
    )


def busy_scheduler() -> tuple[Scheduler, dict[str, Sequence]]:
    """A scheduler with a sequence in each of running, waiting and finished."""
    sched = create_scheduler(scheduler, num_blocks=2, block_size=2, max_num_seqs=1)
    seqs = create_requests(scheduler, sched, ("a1", 1, 1), ("a2", 2, 2), ("a3", 1, 1))
    sched.schedule()
    sched.update()  # a1 finished
    sched.schedule()  # a2 running, a3 waiting
    return sched, seqs


@pytest.mark.parametrize("seq_id", ["a1", "a2", "a3"])
def test_add_rejects_known_seq_id(seq_id: str) -> None:
    sched, _ = busy_scheduler()
    before = state(sched)
    with pytest.raises(ValueError, match=rf"^seq_id '{seq_id}' was already added"):
        sched.add(Sequence(seq_id=seq_id, prompt_len=1, max_tokens=1))
    assert state(sched) == before


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("status", SequenceStatus.RUNNING),
        ("status", SequenceStatus.FINISHED),
        ("output", [5]),
        ("num_computed", 1),
        ("num_blocks", 1),
    ],
)
def test_add_rejects_sequence_that_is_not_fresh(field: str, value: object) -> None:
    sched, _ = busy_scheduler()
    seq = Sequence(seq_id="b1", prompt_len=1, max_tokens=1)
    setattr(seq, field, value)
    before = state(sched)
    with pytest.raises(
        ValueError, match=rf"^seq 'b1' is not fresh: {field} is {re.escape(repr(value))}"
    ):
        sched.add(seq)
    assert state(sched) == before
    assert getattr(seq, field) == value


def test_add_rejects_request_that_can_never_finish() -> None:
    sched, _ = busy_scheduler()  # num_blocks=2, block_size=2: at most 4 tokens of KV
    before = state(sched)
    with pytest.raises(
        ValueError,
        match=r"^seq 'b1' can never finish: prompt_len \+ max_tokens - 1 = 5 tokens need 3 KV "
        r"blocks of block_size 2, and num_blocks is 2$",
    ):
        sched.add(Sequence(seq_id="b1", prompt_len=3, max_tokens=3))
    assert state(sched) == before
    # Nothing was remembered: the same id is still free for a request that fits.
    sched.add(Sequence(seq_id="b1", prompt_len=3, max_tokens=2))
    assert ids(sched.waiting) == ["a3", "b1"]


def test_add_accepts_request_at_the_feasibility_edge() -> None:
    sched = create_scheduler(scheduler, num_blocks=2, block_size=2)
    create_requests(scheduler, sched, ("a1", 4, 1), ("a2", 1, 4))
    assert ids(sched.waiting) == ["a1", "a2"]


@pytest.mark.parametrize("thing", [None, "a1", object()])
def test_add_rejects_what_is_not_a_sequence(thing: object) -> None:
    sched, _ = busy_scheduler()
    before = state(sched)
    with pytest.raises(ValueError, match=r"^seq must be a Sequence, got "):
        sched.add(thing)  # type: ignore[arg-type]
    assert state(sched) == before


@given(field=st.sampled_from(CONFIG_FIELDS), value=invalid.NOT_POSITIVE_INTS)
def test_any_malformed_config_value_is_refused(field: str, value: object) -> None:
    with pytest.raises(ValueError) as raised:
        create_scheduler(scheduler, **{field: value})
    assert str(raised.value) == f"{field} must be a positive int, got {value!r}"


@given(value=invalid.NOT_EOS_IDS)
def test_any_malformed_eos_token_id_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match=r"^eos_token_id must be an int or None"):
        create_scheduler(scheduler, eos_token_id=value)


@given(seq_id=invalid.NOT_SEQ_IDS, field=st.sampled_from(["prompt_len", "max_tokens"]))
def test_any_malformed_sequence_is_refused(seq_id: object, field: str) -> None:
    with pytest.raises(ValueError, match=r"^seq_id must be a non-empty str"):
        Sequence(seq_id=seq_id, prompt_len=1, max_tokens=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=rf"^{field} must be a positive int"):
        Sequence(**{"seq_id": "a1", "prompt_len": 1, "max_tokens": 1, field: 0})


@given(data=st.data(), config=configs())
def test_any_infeasible_request_is_refused_and_changes_nothing(
    data: st.DataObject, config: Config
) -> None:
    sched = create_scheduler(
        scheduler,
        num_blocks=config.num_blocks,
        block_size=config.block_size,
        max_num_seqs=config.max_num_seqs,
        max_num_batched_tokens=config.max_num_batched_tokens,
    )
    prompt_len, max_tokens = data.draw(invalid.infeasible_requests(config))
    before = state(sched)
    with pytest.raises(ValueError, match=r"^seq 'x' can never finish: .* num_blocks is \d+$"):
        sched.add(Sequence(seq_id="x", prompt_len=prompt_len, max_tokens=max_tokens))
    assert state(sched) == before
