"""Streaming-input sessions (issue 50) as the core holds them: a session's turns run alone,
what its client is streamed, its chunks checked, and a run of vLLM 0.34.0's real Scheduler
recorded here (tests/engine_subjects/vllm/session_trace.json: plain data, no vLLM needed)
that every check holds on and that fires when broken.

The recorded run (sync-v2, 10 blocks of 2, budget 4, two running at most): s1 ([1 2 1],
ignoring eos, 3 tokens a turn) is sent [2 2] at step 2 while its first turn runs and [1]
at step 6, and closed at step 9; s3 ([2 1], 2 tokens a turn) is sent [1 1 2] at step 3 and
closed with it; r2 ([1 2], step 2) waits for a slot until step 7: a session between turns
keeps its slot."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import pytest

from schedcheck.engine.adapter import EngineSetup
from schedcheck.engine.checks import Violation, check_engine
from schedcheck.engine.export import export_test
from schedcheck.engine.strategies import SESSION_CONTINUED, SESSION_QUEUED, observe
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.verdict import EngineVerdict
from schedcheck.engine.vllm.export import render
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from tests.engine.recorded_runs import CHECKS, fired
from tests.engine.recorded_runs import recorded as recorded_run


def recorded() -> EngineTrace:
    return recorded_run("session_trace.json")


def test_a_session_s_turns_continue_from_its_context_less_each_last_token() -> None:
    session = EngineRequest("s", (1, 2, 1), 3, True, 1, chunks=((2, (2, 2)), (6, (1,))))
    w = EngineWorkload(EngineConfig(10, 2, 2, 4), (session,), 2)
    first, second, third = w.turns(session)
    assert first == w.turns(replace(session, chunks=()))[0]
    # the second turn runs on the first's context, its output but the last token, the chunk
    context = [1, 2, 1, *first[:-1], 2, 2]
    expected = []
    for _ in range(3):
        expected.append(w.next_token([*context, *expected]))
    assert second == tuple(expected)
    assert len(third) == 3
    assert w.alone(session) == (*first, *second, *third)
    assert session.total == 3 + 2 + 1 + 3 * 3
    assert w.max_model_len() == session.total


def test_where_the_engine_keeps_each_last_token_a_turn_continues_from_the_whole_output() -> None:
    """Traits.turn_keeps_last (SGLang's: a turn is a new request of its session, its
    history every output token): C' = C + O + chunk; E7 reads the rule off the trace."""
    session = EngineRequest("s", (1, 2, 1), 3, True, 1, chunks=((2, (2, 2)),))
    w = EngineWorkload(EngineConfig(10, 2, 2, 4), (session,), 2)
    (c1, o1), (c2, o2) = w.histories(session, keeps_last=True)
    assert c2 == (*c1, *o1, 2, 2) and len(c2) == len(w.histories(session)[1][0]) + 1
    expected: list[int] = []
    for _ in range(3):
        expected.append(w.next_token([*c2, *expected]))
    assert o2 == tuple(expected) and w.alone(session, keeps_last=True) == (*o1, *o2)
    assert w.alone(session, keeps_last=True) != w.alone(session)  # the rules differ here
    trace = recorded()
    kept = replace(trace, traits=replace(trace.traits, turn_keeps_last=True))
    assert "E7" in [v.check for v in check_engine(kept, CHECKS)]  # vLLM's run, read so
    assert check_engine(trace, CHECKS) == []
    assert type(trace.traits).from_dict(kept.traits.to_dict()) == kept.traits


def test_a_session_s_chunks_are_checked_and_round_trip() -> None:
    config = EngineConfig(12, 2, 2, 4)
    early = EngineRequest("s", (1,), 2, arrival=3, chunks=((2, (1,)),))
    empty = EngineRequest("t", (1,), 2, chunks=((2, ()),))
    closed = EngineRequest("u", (1,), 2, chunks=((4, (1,)),), close=3)
    lone = EngineRequest("v", (1,), 2, close=3)
    problems = EngineWorkload(config, (early, empty, closed, lone), 2).problems()
    assert any("s's chunks [2] are not sent in order from step 3" in p for p in problems)
    assert any("t has an empty chunk" in p for p in problems)
    assert any("u is closed at step 3, before its last chunk" in p for p in problems)
    assert any("v has a close at step 3 but no chunks" in p for p in problems)
    good = EngineWorkload(config, (EngineRequest("s", (1,), 2, chunks=((2, (1, 2)),)),), 2)
    assert good.problems() == []
    assert good.requests[0].closed_at == 2
    assert EngineWorkload.from_json(good.to_json()) == good


def test_the_recorded_run_is_what_the_docstring_says_and_every_check_holds() -> None:
    trace = recorded()
    assert check_engine(trace, CHECKS) == []
    w = trace.workload
    assert trace.outputs == {r.name: w.alone(r) for r in w.requests}
    s1 = w.requests[0]
    assert len(trace.outputs["s1"]) == sum(len(t) for t in w.turns(s1)) == 9
    assert next(s.step for s in trace.steps if any(x.name == "r2" for x in s.scheduled)) == 7
    assert {SESSION_CONTINUED, SESSION_QUEUED} <= observe(trace)


def test_e7_reads_every_turn_and_e1_a_position_past_max_model_len() -> None:
    trace = recorded()
    one_turn = {**trace.outputs, "s3": trace.outputs["s3"][:2]}
    found = fired(replace(trace, outputs=one_turn), "E7")
    assert found and "s3 produced [2, 2]" in found[0].message
    # max_model_len below what s1 grows to: its later turns' positions are past it
    short = replace(trace.workload, config=replace(trace.workload.config, max_model_len=8))
    found = fired(replace(trace, workload=short), "E1")
    assert found and "past max_model_len 8" in found[0].message


def test_a_session_s_export_sends_what_its_client_sent_and_an_engine_that_cannot_refuses() -> None:
    """The recorded run exported (vLLM's part written without vLLM): SENT lists each chunk
    and close at its step, in the order the run sent them; E7's ALONE is every turn's output
    in turn; NEXT holds each turn's prefixes. An engine whose test cannot send (no
    `send_body`) refuses the export, naming why, rather than drop the chunks."""
    trace = recorded()
    w = trace.workload
    wrong = replace(trace, outputs={**trace.outputs, "s1": (9,)})
    verdict = EngineVerdict(wrong, [Violation("E7", 9, "end of run", "s1 produced [9]")])
    setup = EngineSetup("/nowhere", "vllm", "", "", modes=("sync-v2",))
    rendered = render(setup, wrong)
    assert not isinstance(rendered, str)
    text = export_test(verdict, rendered, "vLLM", "schedcheck engine --engine vllm")
    sent = text.split("SENT = ", 1)[1].split("\n# ", 1)[0].split("\nLAST", 1)[0]
    assert eval(sent) == {
        2: [("s1", [2, 2])],
        3: [("s3", [1, 1, 2]), ("s3", None)],
        6: [("s1", [1])],
        9: [("s1", None)],
    }
    assert "LAST = 9" in text and "SESSIONS = {'s1', 's3'}" in text
    alone = eval(text.split("ALONE = ", 1)[1].split("  #", 1)[0])
    assert alone == {r.name: list(w.alone(r)) for r in w.requests}
    table = eval(text.split("NEXT = ", 1)[1].split("\nARRIVALS", 1)[0])
    for r in w.requests:
        for context, out in w.histories(r):
            tokens = (*context, *out)
            assert all(table[tokens[:k]] == tokens[k] for k in range(len(context), len(tokens)))
    with pytest.raises(ValueError, match="streams input to a session"):
        export_test(verdict, dataclasses.replace(rendered, send_body=""), "vLLM", "")
