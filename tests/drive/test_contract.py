"""The contract check: what it lists, and that a keeping submission gets no problem."""

from __future__ import annotations

from types import ModuleType

import pytest

from schedcheck import scheduler
from schedcheck.drive.contract import contract_problems


def with_scheduler(source: str) -> ModuleType:
    """The reference with a Scheduler whose constructor is `source` (a def, indented)."""
    module = ModuleType("submission")
    module.Sequence = scheduler.Sequence  # type: ignore[attr-defined]
    module.SequenceStatus = scheduler.SequenceStatus  # type: ignore[attr-defined]
    namespace = {"Base": scheduler.Scheduler}
    exec(f"class Scheduler(Base):\n{source}", namespace)
    module.Scheduler = namespace["Scheduler"]  # type: ignore[attr-defined]
    return module


INIT = (
    "    def __init__(self, num_blocks, block_size, max_num_seqs, max_num_batched_tokens,\n"
    "                 sample_fn, eos_token_id{}):\n"
    "        super().__init__(num_blocks, block_size, max_num_seqs, max_num_batched_tokens,\n"
    "                         sample_fn, eos_token_id)\n"
)


def test_the_reference_keeps_the_contract() -> None:
    assert contract_problems(scheduler) == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("default", "problem"),
    [("", "it has no default"), ("=0", "its default is 0"), ("=-1", "its default is -1")],
)
def test_eos_token_id_must_default_to_none(default: str, problem: str) -> None:
    """A caller may leave eos_token_id out (the driver does, issue 38): its default is
    part of the contract."""
    problems = contract_problems(with_scheduler(INIT.format(default)))
    assert problems == [
        "Scheduler(...)'s eos_token_id must default to None, as the contract says (a caller "
        f"may leave it out), but {problem}"
    ]


def test_a_none_default_or_keyword_arguments_keep_it() -> None:
    assert contract_problems(with_scheduler(INIT.format("=None"))) == []
    kwargs = "    def __init__(self, **kw):\n        super().__init__(**kw)\n"
    assert contract_problems(with_scheduler(kwargs)) == []
