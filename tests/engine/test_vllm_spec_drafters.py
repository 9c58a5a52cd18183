"""Drafters with a forward pass of their own (issue 49): the workload's kind of drafter, the
lookahead slots its KV takes (E17) and the input rows a draft model takes of the step's
budget (E13), on two runs of vLLM 0.34.0's real AsyncScheduler in mode async-v2 recorded
here (tests/engine_subjects/vllm/, plain data, no vLLM needed):

- spec_lookahead_trace.json: an EAGLE-3 head (drafter "hidden"), two drafts a step, missing
  4 in 8; blocks of 2. At step 3 w1 computes positions 5..7 (its token and two drafts), and
  the head then writes the KV of its second draft at position 8 at most (its first on the
  step's own positions): vLLM gave w1 a fifth block for it
  (`allocate_slots(num_lookahead_tokens=2)`, one slot more than the head writes).
- spec_model_trace.json: a draft model (drafter "model"), three drafts, a budget of 4. At
  step 2 r1 takes 2 tokens and its draft model's retained input row one more (0.34's
  `max_num_new_slots_for_drafting`), so `input_budget` is down to that one row and r2
  waits: no wasted step.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedcheck.engine.adapter import EngineSetup, Features
from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.command import unsupported
from schedcheck.engine.export import fires, module_constants
from schedcheck.engine.strategies import DRAFTS_LOOKAHEAD, engine_workloads, observe
from schedcheck.engine.trace import UNDRIVABLE, EngineFailure, EngineStep, EngineTrace
from schedcheck.engine.verdict import workload_lines
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.engine.vllm.drive import TRAITS
from schedcheck.engine.workload import DRAFTERS, EngineWorkload
from schedcheck.invariants.violation import Violation

HERE = Path(__file__).resolve().parent.parent / "engine_subjects" / "vllm"
CHECKS = active(on=VLLM.policies_on)


def recorded(name: str) -> EngineTrace:
    return EngineTrace.from_dict(json.loads((HERE / name).read_text()))


def fired(trace: EngineTrace, check: str) -> list[Violation]:
    return [v for v in check_engine(trace, CHECKS) if v.check == check]


def table(trace: EngineTrace, at: int, name: str, blocks: int) -> EngineTrace:
    """The trace with `name`'s block table at step `at` cut to its first `blocks`."""

    def one(step: EngineStep) -> EngineStep:
        if step.step != at:
            return step
        views = tuple(
            s._replace(block_table=s.block_table[:blocks]) if s.name == name else s
            for s in step.scheduled
        )
        return replace(step, scheduled=views)

    return replace(trace, steps=tuple(one(s) for s in trace.steps))


def test_the_lookahead_run_is_what_the_docstring_says_and_every_check_holds() -> None:
    trace = recorded("spec_lookahead_trace.json")
    w = trace.workload
    assert (w.drafter, w.drafts, w.lookahead, w.config.mode) == ("hidden", 2, 1, "async-v2")
    assert check_engine(trace, CHECKS) == [] and "E17" in CHECKS
    finished = {r.name: w.alone(r) for r in w.requests if r.name != "w3"}  # w3 aborted
    assert {n: o for n, o in trace.outputs.items() if n != "w3"} == finished
    w1 = next(s for s in trace.steps[2].scheduled if s.name == "w1")
    assert (w1.num_cached, w1.num_scheduled, len(w1.token_ids), w1.drafts) == (5, 3, 8, 2)
    assert len(w1.block_table) == 5  # positions 0..9: 8 is the head's
    assert DRAFTS_LOOKAHEAD in observe(trace)


def test_e17_fires_on_a_table_without_the_lookahead_slots_and_names_them() -> None:
    trace = recorded("spec_lookahead_trace.json")
    short = table(trace, 3, "w1", 4)  # positions 0..7: the head's write at 8 lands elsewhere
    found = fired(short, "E17")
    assert [(v.step, v.seq_ids) for v in found] == [(3, ("w1",))]
    assert "up to position 8" in found[0].message and "covers only 8" in found[0].message
    # E1 holds: the step's own positions (5..7) are inside the table; only the drafter's
    # slot is not
    assert fired(short, "E1") == []


def test_e17_is_quiet_where_the_drafter_writes_no_kv() -> None:
    trace = recorded("spec_lookahead_trace.json")
    looked_up = replace(trace, workload=replace(trace.workload, drafter="lookup"))
    assert looked_up.workload.lookahead == 0
    assert fired(table(looked_up, 3, "w1", 4), "E17") == []
    # a table short of the step's own positions is E1's, not E17's
    assert fired(table(trace, 3, "w1", 3), "E1") != []


def test_e17_counts_no_slot_at_or_past_max_model_len() -> None:
    """vLLM's proposers mask positions past max_model_len (no KV written there): a table
    that ends at max_model_len holds every slot the drafter writes."""
    trace = recorded("spec_lookahead_trace.json")
    config = trace.workload.config
    capped = replace(
        trace, workload=replace(trace.workload, config=replace(config, max_model_len=8))
    )
    assert fired(table(capped, 3, "w1", 4), "E17") == []  # position 8 is past max_model_len
    assert trace.workload.max_model_len() == 9 and fired(table(trace, 3, "w1", 4), "E17") != []


def test_e13_leaves_a_draft_model_s_input_rows_out_of_the_room() -> None:
    trace = recorded("spec_model_trace.json")
    w = trace.workload
    assert (w.drafter, w.drafts, w.config.max_num_batched_tokens) == ("model", 3, 4)
    assert trace.traits.draft_inputs == 1  # read off 0.34.0's config for the run
    assert check_engine(trace, CHECKS) == []
    # without the draft model's rows, the step looks as if r2 were left out with room
    plain = replace(trace, traits=replace(trace.traits, draft_inputs=0))
    found = fired(plain, "E13")
    assert [(v.step, v.seq_ids) for v in found] == [(2, ("r2",))]


def test_a_trace_keeps_the_drafter_and_the_draft_inputs_through_json() -> None:
    trace = recorded("spec_model_trace.json")
    again = EngineTrace.from_dict(json.loads(json.dumps(trace.to_dict())))
    assert again.workload.drafter == "model" and again.traits.draft_inputs == 1
    old = trace.to_dict()
    del old["workload"]["drafter"], old["traits"]["draft_inputs"]  # saved before them
    before = EngineTrace.from_dict(old)
    assert (before.workload.drafter, before.traits.draft_inputs) == ("lookup", 0)


def test_a_drafter_that_is_none_of_the_kinds_is_named() -> None:
    w = recorded("spec_model_trace.json").workload
    problems = replace(w, drafter="medusa").problems(reserved=1)
    assert problems == ["drafter 'medusa' is none of lookup, model, hidden"]
    assert replace(w, drafter="lookup").lookahead == 0 and w.lookahead == 3
    assert replace(w, drafter="hidden").lookahead == 2  # its first draft on the step's own
    assert replace(w, drafts=0).lookahead == 0  # no drafts, no slots


def test_a_lone_request_s_blocks_count_its_drafter_s_slots() -> None:
    w = recorded("spec_model_trace.json").workload
    r1 = w.requests[0]  # prompt [1], max_tokens 2: positions 0..1, 3 drafts, 3 slots
    assert replace(w, drafter="lookup").draft_blocks(r1) == 3  # 1 + 2 - 1 + 3 = 5 tokens
    assert w.draft_blocks(r1) == 4  # and 3 more: 8


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.data())
def test_drawn_drafters_are_the_features_and_run_in_their_modes(data: st.DataObject) -> None:
    features = replace(
        VLLM.features,
        draft_modes=("sync-v2", "async-v2"),
        drafters=(("lookup", ()), ("hidden", ("sync-v2",))),
    )
    w = data.draw(engine_workloads(features=features, modes=features.draft_modes))
    assert w.drafter in ("lookup", "hidden")
    if w.drafts and w.drafter == "hidden":
        assert w.config.mode == "sync-v2"
    if w.drafts:
        assert w.config.mode in features.draft_modes
        assert w.config.max_num_batched_tokens >= 1 + w.drafts
        assert all(w.draft_blocks(r) <= w.config.num_blocks - 1 for r in w.requests)
    assert w.problems(reserved=1) == []


def test_a_drafter_is_drawn_among_those_the_workload_s_mode_runs() -> None:
    """Modes keep their shares: a release that runs only its head async drafts with the
    head there (0.22.1 runs n-gram and draft models in sync-v1 only), never moves an
    async workload to sync for a drafter it cannot run."""
    features = replace(
        VLLM.features,
        draft_modes=("async-v2", "sync-v1"),
        drafters=(("lookup", ("sync-v1",)), ("model", ("sync-v1",)), ("hidden", ())),
        connectors=(),  # drafters alone: the other features' draws take none of the 300
        sessions=0,
        layers=(),
    )
    seen: list[tuple[str, str]] = []

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(engine_workloads(features=features, modes=features.draft_modes))
    def drawn(w: EngineWorkload) -> None:
        if w.drafts:
            seen.append((w.config.mode, w.drafter))

    drawn()
    assert {d for m, d in seen if m == "async-v2"} == {"hidden"}
    assert {d for m, d in seen if m == "sync-v1"} == {"lookup", "model", "hidden"}
    # moving the mode to fit the drafter drew async-v2 for one drafting workload in six;
    # the modes' own shares give a half or so (a third on this seed, with the offloading
    # connector among the draws before them)
    share = sum(m == "async-v2" for m, _ in seen) / len(seen)
    assert share >= 1 / 4, f"{share:.2f} of drafting workloads in async-v2"


def test_a_replayed_drafter_the_run_does_not_draw_is_said() -> None:
    w = recorded("spec_model_trace.json").workload
    features = replace(VLLM.features, draft_modes=("async-v2",), drafters=(("lookup", ()),))
    found = unsupported(w, features, ("async-v2",), ())
    assert found == ["a model drafter, which this run does not draw (it draws lookup)"]
    only_sync = replace(
        features, draft_modes=("async-v2", "sync-v2"), drafters=(("model", ("sync-v2",)),)
    )
    assert unsupported(w, only_sync, ("async-v2",), ()) == [
        "mode 'async-v2' with a model drafter, which this release refuses"
    ]
    assert unsupported(w, replace(only_sync, drafters=(("model", ()),)), ("async-v2",), ()) == []


def test_a_setup_keeps_its_drafters_through_json_and_narrows_the_features() -> None:
    setup = EngineSetup(
        "/x",
        "vllm",
        "vllm",
        "vLLM's own",
        draft_modes=("sync-v2",),
        drafters=(("lookup", ()), ("hidden", ("sync-v2",))),
    )
    again = EngineSetup.from_dict(json.loads(json.dumps(setup.to_dict())))
    assert again == setup
    assert setup.features(VLLM.features).drafters == setup.drafters
    assert EngineSetup("/x", "vllm", "vllm", "").features(Features()).drafters == (("lookup", ()),)
    assert tuple(kind for kind, _ in VLLM.features.drafters) == tuple(DRAFTERS)


@pytest.mark.parametrize("kind", list(DRAFTERS))
def test_each_kind_of_drafter_is_said_in_the_report(kind: str) -> None:
    w = replace(recorded("spec_model_trace.json").workload, drafter=kind)
    said = "\n".join(workload_lines(w))
    assert f"proposed by {kind}: {DRAFTERS[kind]}" in said
    assert ("lookahead slots, E17" in said) == (kind != "lookup")


def test_the_exported_e17_fires_where_e17_does_and_is_quiet_on_the_recorded_run() -> None:
    trace = recorded("spec_lookahead_trace.json")
    constants = module_constants(trace)
    assert constants["LOOKAHEAD"] == 1
    assert not any(fires("E17", trace, s.step, constants) for s in trace.steps)
    short = table(trace, 3, "w1", 4)
    assert [v.step for v in check_engine(short, ["E17"])] == [3]
    assert fires("E17", short, 3, constants)
    assert not fires("E17", short, 2, constants)


def test_the_exported_e13_counts_a_draft_model_s_input_rows() -> None:
    trace = recorded("spec_model_trace.json")
    constants = module_constants(trace)
    assert constants["DRAFT_INPUTS"] == 1
    assert not any(fires("E13", trace, s.step, constants) for s in trace.steps)
    plain = {**constants, "DRAFT_INPUTS": 0}  # the property without the rows: it fires
    assert fires("E13", trace, 2, plain)


def test_settle_keeps_each_drafter_in_the_modes_its_trial_runs_in() -> None:
    """vLLM's settle asks each drafter of each draft mode with a trial run: one the release
    refuses (undrivable) is not drawn there, and the header's trial-runs lines say why."""
    refused = {
        ("lookup", "async-v2"): "vLLM 0.22.1 does not run ngram drafts under async scheduling",
        ("model", "async-v2"): "its v2 model runner does not run draft_model drafts",
        ("model", "sync-v2"): "its v2 model runner does not run draft_model drafts",
    }
    asked: list[tuple[str, str]] = []

    def run(w: EngineWorkload) -> EngineTrace:
        asked.append((w.drafter, w.config.mode))
        why = refused.get((w.drafter, w.config.mode))
        failure = None if why is None else EngineFailure(UNDRIVABLE, 0, "Scheduler()", why)
        return EngineTrace(w, TRAITS, failure=failure)

    setup = EngineSetup("/x", "vllm", "vllm", "", draft_modes=("async-v2", "sync-v1", "sync-v2"))
    settled = VLLM.settle(setup, run)
    # each drafter in each mode, then a draft schedule with the first that runs, where it runs
    assert len(asked) == 10 and {w for _, w in asked} == set(setup.draft_modes)
    assert asked[-1] == ("lookup", "sync-v1") and "draft_schedules" not in settled.lacks
    assert settled.drafters == (
        ("lookup", ("sync-v1", "sync-v2")),
        ("model", ("sync-v1",)),
        ("hidden", ()),
    )
    assert settled.settled == (
        "drafter lookup not run in async-v2: " + refused["lookup", "async-v2"],
        "drafter model not run in async-v2, sync-v2: " + refused["model", "sync-v2"],
    )
    # no drafter runs anywhere: speculative decoding is not drawn
    nowhere = VLLM.settle(
        setup,
        lambda w: EngineTrace(w, TRAITS, failure=EngineFailure(UNDRIVABLE, 0, "Scheduler()", "no")),
    )
    assert nowhere.draft_modes == () and not nowhere.features(VLLM.features).drafts
    assert VLLM.settle(replace(setup, draft_modes=()), run) == replace(setup, draft_modes=())
    # a release that takes no schedule (before 0.33): none drawn, and the header says why
    said = "vLLM 0.22.1 takes no draft schedule by batch size"

    def no_schedule(w: EngineWorkload) -> EngineTrace:
        if w.draft_schedule:
            return EngineTrace(w, TRAITS, failure=EngineFailure(UNDRIVABLE, 0, "Scheduler()", said))
        return run(w)

    older = VLLM.settle(setup, no_schedule)
    assert "draft_schedules" in older.lacks and not older.features(VLLM.features).draft_schedules
    assert older.settled[-1] == f"no dynamic draft lengths: {said}"


def test_a_draft_schedule_is_checked_read_and_said() -> None:
    w = recorded("spec_model_trace.json").workload  # 3 drafts, max_num_seqs 2
    dynamic = replace(w, draft_schedule=((1, 1, 3), (2, 4, 1)))
    assert dynamic.problems(reserved=1) == []
    assert [dynamic.drafts_after(n) for n in (1, 2, 3, 9)] == [3, 1, 1, 1]
    assert replace(w, draft_schedule=((1, 1, 5),)).drafts_after(1) == 3  # capped at drafts
    assert w.drafts_after(2) == 3  # no schedule: drafts after every step
    bad = {
        ((2, 3, 1),): "must start at batch size 1",
        ((1, 2, 1), (2, 3, 1)): "entry [2, 3, 1] is not a range of batch sizes after 2",
        ((1, 2, 4),): "with 0 to 3 drafts",
    }
    for schedule, said in bad.items():
        found = replace(w, draft_schedule=schedule).problems(reserved=1)
        assert any(said in p for p in found), (schedule, found)
    assert any(
        "only a workload with drafts" in p
        for p in replace(w, drafts=0, draft_schedule=((1, 2, 0),)).problems(reserved=1)
    )
    again = EngineWorkload.from_json(dynamic.to_json())
    assert again == dynamic and EngineWorkload.from_dict({**w.to_dict()}).draft_schedule == ()
    said = "\n".join(workload_lines(dynamic))
    assert "drafts after a step by its batch size: 1-1: 3, 2-4: 1" in said


def test_the_proposer_drafts_a_prefix_of_its_chain_when_asked_for_fewer() -> None:
    w = replace(recorded("spec_model_trace.json").workload, draft_miss_per_8=3)
    for tokens in ((1,), (1, 2), (2, 1, 1), (1, 1, 2, 2)):
        full = w.propose(tokens)
        for most in range(0, w.drafts + 1):
            assert w.propose(tokens, most) == full[:most]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.data())
def test_drawn_draft_schedules_are_valid_and_cover_the_batch_sizes(data: st.DataObject) -> None:
    features = replace(VLLM.features, draft_modes=("sync-v2",), draft_schedules=True)
    w = data.draw(engine_workloads(features=features, modes=("sync-v2",)))
    assert w.problems(reserved=1) == []
    if w.draft_schedule:
        assert w.drafts and w.draft_schedule[0][0] == 1
        assert w.draft_schedule[-1][1] == w.config.max_num_seqs
    plain = data.draw(engine_workloads(features=replace(features, draft_schedules=False)))
    assert plain.draft_schedule == ()
