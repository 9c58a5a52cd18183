"""SGLang's streaming sessions (`--enable-streaming-session`) as the core's sessions: each
turn a request of the session (its id the request's name), sent once the turn before it
ended; the session's KV held in its slot between turns (PAUSED), freed at its close; and
the two bugs the search finds there (docs/findings.md): SGLANG-06, a session's next turn
never admitted while paused sessions hold every request row, and SGLANG-07, with EAGLE a
next turn that reads the KV of its last turn's last token, never computed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from schedcheck.engine.checks import check_engine
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.sglang.adapter import ADAPTER as SGLANG
from schedcheck.engine.strategies import SESSION_CONTINUED, SESSION_QUEUED, observe
from schedcheck.engine.trace import PAUSED
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from tests.engine.test_sglang import CHECKS, LOOPS, build, run_patched
from tests.engine.test_sglang import sglang as sglang  # the module's engine fixture
from tests.engine_subjects.sglang.mutants import SESSION_MUTANTS, SglangMutant

pytestmark = pytest.mark.sglang

# s1 opens a session of [1 2 1 2], is sent [2 2] at step 2 (while its first turn runs) and
# [1] at step 3, and is closed at step 12; r2 arrives at step 2 and shares its prompt's stem
TURNS = EngineWorkload(
    EngineConfig(40, 1, 3, 8),
    (
        EngineRequest("s1", (1, 2, 1, 2), 4, chunks=((2, (2, 2)), (3, (1,))), close=12),
        EngineRequest("r2", (1, 2, 1, 1), 4, arrival=2),
    ),
    2,
)


def in_loop(workload: EngineWorkload, loop: str) -> EngineWorkload:
    return replace(workload, config=replace(workload.config, mode=loop))


@pytest.mark.parametrize("loop", LOOPS)
def test_a_session_runs_turn_after_turn_holding_its_kv_between(
    sglang: LocalEngine, loop: str
) -> None:
    """Every check holds; the client is streamed each turn's output in turn, each turn run
    on its whole history (SGLang keeps each last token); between turns the session holds
    its slot's KV, and after its close nothing."""
    build(sglang).patch = None
    trace = sglang.run(in_loop(TURNS, loop))
    assert trace.failure is None and check_engine(trace, CHECKS) == []
    s1 = TURNS.requests[0]
    assert trace.outputs["s1"] == TURNS.alone(s1, keeps_last=True)
    assert len(TURNS.turns(s1, keeps_last=True)) == 3 and trace.traits.turn_keeps_last
    paused = [
        s.after_postprocess.tables["s1"]
        for s in trace.steps
        if s.after_postprocess and s.after_postprocess.status["s1"] == PAUSED
    ]
    assert paused and all(paused)  # its KV held while it waits for its client
    last = trace.steps[-1].after_postprocess
    assert last is not None and last.status["s1"] == "FINISHED" and not last.tables["s1"]


def sglang_06(rows: int) -> EngineWorkload:
    """One session, a turn of one token then a chunk, under max_running_requests `rows`
    (SGLang's request rows: `req_to_token_pool` is that size)."""
    return EngineWorkload(
        EngineConfig(11, 1, rows, 4),
        (EngineRequest("r1", (1,), 1, chunks=((1, (1,)),)),),
        1,
    )


@pytest.mark.parametrize("loop", LOOPS)
def test_sglang_06_a_next_turn_waits_for_the_row_its_own_session_holds(
    sglang: LocalEngine, loop: str
) -> None:
    """With one request row, the paused session holds it, and admission counts free rows
    only (`get_num_allocatable_reqs`): its next turn, which would run on that very row, is
    never admitted (E5). With a row free, the same session runs to its end."""
    build(sglang).patch = None
    stuck = sglang.run(in_loop(sglang_06(1), loop))
    assert stuck.failure is not None and stuck.failure.check == "E5", stuck.failure
    assert "stuck" in stuck.failure.message
    free = sglang.run(in_loop(sglang_06(2), loop))
    assert free.failure is None and check_engine(free, CHECKS) == []


def behind(max_tokens: int) -> EngineWorkload:
    """A session s1 of [1 2], four tokens a turn, sent [1]; r2 ([2 1 1], `max_tokens`)
    arrives at step 3, while s1's first turn runs, in a pool of 19 slots."""
    return EngineWorkload(
        EngineConfig(20, 1, 3, 8, mode="normal"),
        (
            EngineRequest("s1", (1, 2), 4, True, chunks=((1, (1,)),)),
            EngineRequest("r2", (2, 1, 1), max_tokens, True, arrival=3),
        ),
        2,
        eos_per_16=0,
    )


def test_sglang_06_a_fresh_request_at_the_head_blocks_the_turn_that_would_free_its_room(
    sglang: LocalEngine,
) -> None:
    """SGLANG-06's other face: r2 asks 17 slots; s1's session holds 5 after its first turn,
    so r2 does not fit and waits at the head of the queue, and the admission loop stops
    there (`break` on NO_TOKEN): s1's next turn, behind it, never runs, so the session never
    ends and never frees its 5 (E5). With r2 asking 11, both run."""
    build(sglang).patch = None
    stuck = sglang.run(behind(14))
    assert stuck.failure is not None and stuck.failure.check == "E5", stuck.failure
    free = sglang.run(behind(8))
    assert free.failure is None and check_engine(free, CHECKS) == []


def sglang_07(drafts: int) -> EngineWorkload:
    """A session of [1 1 1], three tokens a turn, sent [1]; with EAGLE drafting `drafts`."""
    return EngineWorkload(
        EngineConfig(15, 1, 3, 4, mode="normal"),
        (EngineRequest("r1", (1, 1, 1), 3, chunks=((1, (1,)),)),),
        1,
        drafts=drafts,
        drafter="hidden" if drafts else "lookup",
    )


def test_sglang_07_with_drafts_a_next_turn_reads_kv_never_written(sglang: LocalEngine) -> None:
    """The first turn ends on a verify; the slot's committed KV is set to the whole
    output (`try_cache_finished_req`: the prompt and `finished_len`), its last token's
    KV never computed, and a speculative decode's allocation runs past it, so the clamp
    to what was allocated does not cut it: the next turn takes that position as cached
    (E2). Without drafts the allocation ends before it, and the run is right."""
    build(sglang).patch = None
    wrong = sglang.run(sglang_07(1))
    found = check_engine(wrong, CHECKS)
    assert found and found[0].check == "E2" and "holds nothing" in found[0].message
    right = sglang.run(sglang_07(0))
    assert right.failure is None and check_engine(right, CHECKS) == []


def test_a_session_in_the_search_is_drawn_and_reached(sglang: LocalEngine) -> None:
    """The adapter draws sessions (Features.sessions), and a session run labels its turns."""
    assert sglang.setup.features(SGLANG.features).sessions == 2
    trace = sglang.run(in_loop(TURNS, "normal"))
    assert {SESSION_CONTINUED, SESSION_QUEUED} <= observe(trace)


@pytest.mark.parametrize("mutant", SESSION_MUTANTS, ids=[m.name for m in SESSION_MUTANTS])
@pytest.mark.parametrize("loop", LOOPS)
def test_each_session_mutant_is_caught_by_its_check(
    sglang: LocalEngine, mutant: SglangMutant, loop: str
) -> None:
    """On the turns above, in each loop: the release passes them (tested above), the mutant
    fails them by its check (a history one token short reads, in the overlap loop, the
    KV the extra decode computed for the dropped token first: E2 before E7)."""
    trace = run_patched(sglang, mutant.patch, in_loop(TURNS, loop))
    found = check_engine(trace, CHECKS)
    assert mutant.check in [v.check for v in found], found
