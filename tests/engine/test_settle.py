"""The trial runs before a nano-vllm fork's search (issue 53; engine/nanovllm/settle.py): the
block sizes a fork accepts, its own step given up for schedcheck's loop where it cannot be
built, and never for a loop that cannot build the fork's objects either. Each rule on a
scripted engine (what each trial run returns), firing and quiet."""

from __future__ import annotations

from collections.abc import Callable

from schedcheck.engine.adapter import EngineSetup
from schedcheck.engine.nanovllm.settle import settle, trial
from schedcheck.engine.nanovllm.step import TRAITS
from schedcheck.engine.trace import UNDRIVABLE, EngineFailure, EngineTrace
from schedcheck.engine.workload import EngineWorkload

SETUP = EngineSetup("/fork", "nanovllm", "chunked", "read", modes=("own",))
DRAWN = (2, 4)


def engine(
    refuses: Callable[[int, str], EngineFailure | None],
) -> Callable[[EngineWorkload], EngineTrace]:
    """A run whose trace fails as `refuses(block_size, mode)` says."""

    def run(w: EngineWorkload) -> EngineTrace:
        return EngineTrace(w, TRAITS, failure=refuses(w.config.block_size, w.config.mode))

    return run


def undrivable(why: str) -> EngineFailure:
    return EngineFailure(UNDRIVABLE, 0, "LLMEngine()", why)


def test_a_fork_that_takes_every_size_is_run_as_set_up() -> None:
    assert settle(SETUP, engine(lambda b, m: None), DRAWN, True) == SETUP


def test_the_sizes_a_fork_s_assert_takes_are_those_drawn() -> None:
    page = engine(lambda b, m: None if b % 4 == 0 else undrivable("assert block_size % 4 == 0"))
    got = settle(SETUP, page, DRAWN, True)
    assert got.block_sizes == (4,) and got.modes == ("own",)
    assert got.settled == ("block sizes: 4, those it accepts (at 2: assert block_size % 4 == 0)",)
    wide = engine(lambda b, m: None if b % 8 == 0 else undrivable("page of 8"))
    assert settle(SETUP, wide, DRAWN, True).block_sizes == (8, 16)


def test_an_own_step_that_cannot_be_built_falls_back_to_schedcheck_s_loop_and_says_why() -> None:
    own_refused = engine(lambda b, m: undrivable("no embed_tokens") if m == "own" else None)
    got = settle(SETUP, own_refused, DRAWN, True)
    assert got.modes == ("scheduler",) and got.block_sizes == ()
    assert got.settled == ("not its own step, which cannot be built here: no embed_tokens",)
    assert settle(SETUP, own_refused, DRAWN, False) == SETUP  # --loop own was asked
    said = settle(SETUP, own_refused, DRAWN, "its runner changes token_ids").settled
    assert said == ("nor schedcheck's loop: its runner changes token_ids",)


def test_a_fallback_whose_loop_cannot_build_the_fork_s_objects_is_refused() -> None:
    """KKKZOZ's Sequence() needs what only its LLMEngine sets up, babusid's Scheduler() other
    arguments: schedcheck's loop raising there is not their bug (was E6 for both)."""

    def refuses(b: int, m: str) -> EngineFailure | None:
        if m == "own":
            return undrivable("cannot be built")
        return EngineFailure("E6", 1, "Sequence()", "raised KeyError: 'config'")

    got = settle(SETUP, engine(refuses), DRAWN, True)
    assert got.modes == ("own",)
    assert got.settled[0].startswith("nor schedcheck's loop: its Sequence() raised as")

    def verdict(b: int, m: str) -> EngineFailure | None:  # its bug, in a step: a verdict
        if m == "own":
            return undrivable("cannot be built")
        return EngineFailure("E6", 2, "schedule()", "AssertionError")

    assert settle(SETUP, engine(verdict), DRAWN, True).modes == ("scheduler",)


def test_an_intake_that_refuses_a_pool_holding_the_request_falls_back() -> None:
    """shunwendongan's add_request() asks for a block more than the request holds: at each
    size a roomy trial passes and a tight one is refused; that is no block size's doing."""

    def strict(w: EngineWorkload) -> EngineTrace:
        need = w.requests[0].peak_blocks(w.config.block_size)
        tight = w.config.mode == "own" and w.config.num_blocks == need
        failure = undrivable("needs 3 KV blocks but only 2") if tight else None
        return EngineTrace(w, TRAITS, failure=failure)

    got = settle(SETUP, strict, DRAWN, True)
    assert got.modes == ("scheduler",) and got.block_sizes == ()
    said = "not its own step, which cannot be built here: needs 3 KV blocks but only 2"
    assert got.settled == (said,)


def test_a_trial_s_pool_holds_its_request_and_the_spare_blocks() -> None:
    for size in (2, 4, 256):
        for spare in (0, 2):
            w = trial(size, "own", spare)
            assert w.config.num_blocks == w.requests[0].peak_blocks(size) + spare
            assert not w.problems()
