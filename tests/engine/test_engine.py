"""Engine checking (issue 19): the checks fire on the engines written here in nano-vllm's API
(tests/engine_subjects/), each mutant with the check its docstring names, the correct engine
passes, the traces and workloads round-trip as JSON, and the workloads reach the hard
parts."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from schedcheck import faults
from schedcheck.cli.main import main
from schedcheck.engine.adapter import Features
from schedcheck.engine.checks import CATALOGUE, check_engine
from schedcheck.engine.command import drawn
from schedcheck.engine.isolated import IsolatedEngine
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.nanovllm.adapter import ADAPTER as NANO
from schedcheck.engine.nanovllm.config import read_setup
from schedcheck.engine.nanovllm.loader import NotAnEngine, load_engine
from schedcheck.engine.search import search_engine
from schedcheck.engine.strategies import LABELS, REPREFILL, engine_workloads, observe
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.verdict import verify_engine
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from schedcheck.sandbox.process import Limits
from tests.engine_subjects.catalogue import CORRECT, MUTANTS, checkout, expected_checks
from tests.helpers import rotation_day

SEARCH = settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def workload(
    *requests: EngineRequest, blocks: int = 4, size: int = 2, seqs: int = 2, budget: int = 4
) -> EngineWorkload:
    return EngineWorkload(EngineConfig(blocks, size, seqs, budget), requests)


def request(name: str, *prompt: int, max_tokens: int = 2, arrival: int = 1) -> EngineRequest:
    return EngineRequest(name, prompt, max_tokens, False, arrival)


SHARED = workload(request("r1", 1, 1, 2, 1), request("r2", 1, 1, 2, 2, arrival=2))


@pytest.fixture(scope="module")
def correct() -> LocalEngine:
    return LocalEngine(NANO, read_setup(str(CORRECT)))


@given(w=engine_workloads())
@SEARCH
def test_the_correct_engine_passes(correct: LocalEngine, w: EngineWorkload) -> None:
    verdict = verify_engine(correct, w)
    assert verdict.ok, verdict.report()


# One mutant a day in the default run (a search and its shrinking take seconds each); all
# of them with -m costly, which CI runs too.
TODAY = {MUTANTS[rotation_day() % len(MUTANTS)]}


@pytest.mark.heavy
@pytest.mark.parametrize(
    "mutant",
    [pytest.param(m, marks=() if m in TODAY else pytest.mark.costly) for m in MUTANTS],
    ids=lambda p: p.stem,
)
def test_each_mutant_is_caught_by_the_check_it_names(mutant: Path) -> None:
    found = search_engine(LocalEngine(NANO, read_setup(str(checkout(mutant)))), examples=1000)
    assert found.failure is not None, f"{mutant.stem} passed {found.examples} workloads"
    check = found.failure[1].violations[0].check
    assert check in expected_checks(mutant), found.failure[1].report()
    assert set(expected_checks(mutant)) <= set(CATALOGUE)


WHOLE = CORRECT.parent / "whole"  # nano-vllm's generation before chunked prefill


@given(w=engine_workloads(whole_prefill=True))
@SEARCH
def test_the_whole_prefill_generation_is_driven_and_passes(w: EngineWorkload) -> None:
    engine = LocalEngine(NANO, read_setup(str(WHOLE)))
    assert engine.setup.runner == "whole"
    verdict = verify_engine(engine, w)
    assert verdict.ok, verdict.report()


@pytest.mark.costly  # a search of 13 s; E8 itself is the rotating mutants' (pickle_lacks_tokens)
def test_the_whole_prefill_generation_is_checked_too(tmp_path: Path) -> None:
    """nano-vllm's old pickle rule ("prefill = no output yet") on the old generation: the
    re-prefill of a sequence preempted after output reaches its workers without tokens."""
    root = tmp_path / "old"
    shutil.copytree(WHOLE, root)
    sequence = root / "nanovllm" / "engine" / "sequence.py"
    rule = "\n\nSequence._sends_all_tokens = lambda self: self.num_completion_tokens == 0\n"
    sequence.write_text(sequence.read_text() + rule)
    found = search_engine(LocalEngine(NANO, read_setup(str(root))), examples=1000)
    assert found.failure is not None and found.failure[1].violations[0].check == "E8"


def test_a_shared_prefix_hits_the_cache_and_every_check_is_quiet(correct: LocalEngine) -> None:
    verdict = verify_engine(correct, SHARED)
    assert verdict.ok, verdict.report()
    (r2,) = [s for step in verdict.trace.steps for s in step.scheduled if s.name == "r2"][:1]
    assert r2.num_cached == 2  # its first block came from r1's


def test_a_decode_row_in_a_prefill_step_is_no_re_prefill(correct: LocalEngine) -> None:
    """A re-prefill (a coverage label) is a sequence with output scheduled again after its
    preemption, not a decode row of a step that also prefills (a mixed batch)."""
    w = workload(request("r1", 1, 2, max_tokens=3), request("r2", 2, 1, max_tokens=3), blocks=8)
    trace = verify_engine(correct, w).trace
    assert any(s.scheduled and not s.is_prefill for s in trace.steps)
    mixed = replace(trace, steps=tuple(replace(s, is_prefill=True) for s in trace.steps))
    assert REPREFILL not in observe(trace) and REPREFILL not in observe(mixed)


def test_each_check_fires_on_a_trace_broken_for_it(correct: LocalEngine) -> None:
    """E1-E4 and E7-E8 on a correct trace with one thing changed; E5 and E6 come from the
    driver (next tests)."""
    trace = verify_engine(correct, SHARED).trace
    step = trace.steps[0]
    seq, copy, before = step.scheduled[0], step.copies[0], step.after_schedule

    def with_step(**changes: object) -> EngineTrace:
        steps = (dataclasses.replace(step, **changes), *trace.steps[1:])
        return dataclasses.replace(trace, steps=steps)

    broken = {
        "E1": with_step(scheduled=(seq._replace(num_scheduled=len(seq.token_ids) + 1),)),
        "E2": with_step(scheduled=(seq._replace(block_table=(3, 3)),)),
        "E3": with_step(after_schedule=before._replace(free=(0, *before.free))),
        "E4": dataclasses.replace(
            trace, workload=dataclasses.replace(trace.workload, config=EngineConfig(4, 2, 2, 1))
        ),
        "E7": dataclasses.replace(trace, outputs={**trace.outputs, "r1": (2, 2)}),
        "E8": with_step(copies=(copy._replace(token_ids=None, last_token=None),)),
    }
    assert check_engine(trace) == []
    for check, bad in broken.items():
        assert check in {v.check for v in check_engine(bad)}, check


def _engine_with(tmp_path: Path, scheduler_body: str) -> Path:
    root = tmp_path / "fork"
    shutil.copytree(CORRECT, root)
    target = root / "nanovllm" / "engine" / "scheduler.py"
    target.write_text(target.read_text() + scheduler_body)
    return root


def test_an_engine_that_never_finishes_is_e5(tmp_path: Path) -> None:
    root = _engine_with(tmp_path, "\n\nScheduler.schedule = lambda self: ([], False)\n")
    verdict = verify_engine(LocalEngine(NANO, read_setup(str(root))), SHARED)
    assert [v.check for v in verdict.violations] == ["E5"]
    assert "not finished after" in verdict.violations[0].message


def test_an_engine_that_raises_is_e6_naming_its_line(tmp_path: Path) -> None:
    body = "\n\ndef _boom(self, seq):\n    raise RuntimeError('no room')\n\nScheduler.add = _boom\n"
    verdict = verify_engine(
        LocalEngine(NANO, read_setup(str(_engine_with(tmp_path, body)))), SHARED
    )
    (v,) = verdict.violations
    assert v.check == "E6" and "RuntimeError: no room" in v.message
    assert "nanovllm/engine/scheduler.py" in v.message and "_boom" in v.message


def test_a_trace_and_a_workload_round_trip_as_json(correct: LocalEngine) -> None:
    trace = verify_engine(correct, SHARED).trace
    again = EngineTrace.from_dict(json.loads(json.dumps(trace.to_dict())))
    assert again == trace
    assert EngineWorkload.from_json(SHARED.to_json()) == SHARED


def test_a_workload_of_a_mode_with_a_reset_round_trips_and_an_old_file_still_reads() -> None:
    drawn = replace(SHARED, config=replace(SHARED.config, mode="async-v2"), resets=(3,))
    assert EngineWorkload.from_json(drawn.to_json()) == drawn
    old = json.loads(SHARED.to_json())
    del old["resets"], old["config"]["mode"]  # saved before either existed
    assert EngineWorkload.from_dict(old) == SHARED


def test_a_saved_workload_asking_what_the_engine_lacks_is_refused_at_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """nano-vllm has no abort, no prefix-cache reset and one mode: a file asking for them is
    a usage error naming each, never run with them silently left out."""
    request = replace(SHARED.requests[0], abort=2)
    asks = replace(
        SHARED,
        config=replace(SHARED.config, mode="async-v2"),
        requests=(request, *SHARED.requests[1:]),
        resets=(2,),
    )
    saved = tmp_path / "asks.json"
    saved.write_text(asks.to_json())
    assert main(["engine", str(CORRECT), "--in-process", "--replay", str(saved)]) == faults.USAGE
    err = capsys.readouterr().err
    assert "aborts, which this engine's adapter does not drive" in err
    assert "prefix-cache resets, which this engine's adapter does not drive" in err
    assert "mode 'async-v2', which this run does not have" in err


def test_max_model_len_caps_the_output_alone_and_a_prompt_without_room_is_refused() -> None:
    """vLLM ends a request whose sequence reaches max_model_len (check_stop), and its input
    processor refuses a prompt that leaves no room for one output token."""
    capped = workload(replace(request("r1", 1, 2, max_tokens=5), ignore_eos=True), blocks=8)
    capped = replace(capped, config=replace(capped.config, max_model_len=4))
    assert capped.most(capped.requests[0]) == 2 and len(capped.alone(capped.requests[0])) == 2
    assert capped.problems() == []
    full = replace(capped, config=replace(capped.config, max_model_len=2))
    assert "r1's prompt of 2 tokens leaves no room for an output" in full.problems()[0]
    over = replace(capped, config=replace(capped.config, num_blocks=1))
    assert "max_model_len 4 is over the 2 tokens the pool holds" in " ".join(over.problems())


def test_output_alone_is_the_token_function_unrolled() -> None:
    w = workload(request("r1", 1, 2, max_tokens=5))
    out = w.alone(w.requests[0])
    tokens = [1, 2]
    for token in out:
        assert token == w.next_token(tokens)
        tokens.append(token)
    assert len(out) == 5 or out[-1] == 0


def test_invalid_workloads_are_named() -> None:
    too_big = workload(request("r1", 1, 1, 1, 1, 1, max_tokens=4), blocks=2)
    assert "r1 needs 4 KV blocks" in too_big.problems()[0]
    assert "below max_num_seqs" in workload(request("r1", 1), seqs=3, budget=2).problems()[0]


def test_the_workloads_reach_every_hard_part(correct: LocalEngine) -> None:
    found = search_engine(correct, examples=300)
    assert found.failure is None
    assert {label for label in LABELS if found.reached[label] == 0} == set()


def test_two_checkouts_load_side_by_side(tmp_path: Path) -> None:
    first = load_engine(CORRECT)
    other = load_engine(checkout(MUTANTS[0]))
    assert first.Scheduler is not other.Scheduler
    assert first.Scheduler.__module__ == other.Scheduler.__module__ == "nanovllm.engine.scheduler"
    with pytest.raises(
        NotAnEngine, match=r"not a nano-vllm checkout: no nanovllm/engine/sequence.py"
    ):
        load_engine(tmp_path)


@pytest.mark.heavy
def test_schedcheck_engine_fails_a_mutant_and_the_saved_workload_replays(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # the mutant the search finds soonest (4 s); every mutant's own test is the rotation's
    mutant = str(checkout(next(m for m in MUTANTS if m.stem == "block_freed_twice")))
    html = tmp_path / "trace.html"
    code = main(["engine", mutant, "--save-failures", str(tmp_path), "--html", str(html)])
    out = capfd.readouterr().out
    assert code == faults.FAIL and "E3 at step" in out and "| step | events | phase |" in out
    assert "isolation: full" in out or "isolation: uid" in out or "isolation: process" in out
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and f"E3: {CATALOGUE['E3'].title}" in page
    assert main(["engine", mutant, "--replay", str(tmp_path / "E3.json")]) == faults.FAIL
    assert main(["engine", str(tmp_path)]) == faults.USAGE  # not a checkout


# The correct engine until a sequence has output; then postprocess() turns.
TURN = """

import os
_real = Scheduler.postprocess


def _turn(self, seqs, ids, is_prefill):
    if any(s.num_completion_tokens for s in seqs):
        {turn}
    _real(self, seqs, ids, is_prefill)


Scheduler.postprocess = _turn
"""


@pytest.mark.parametrize(
    ("turn", "said"),
    [("while True: pass", "did not return within 0.5 s"), ("os._exit(3)", "exited with code")],
    ids=["hangs", "exits"],
)
def test_an_engine_that_hangs_or_ends_its_worker_is_e6(
    tmp_path: Path, turn: str, said: str
) -> None:
    body = TURN.format(turn=turn)
    engine = IsolatedEngine(
        NANO, read_setup(str(_engine_with(tmp_path, body))), Limits(call_timeout=0.5)
    )
    try:
        assert engine.isolation in {"full", "uid", "process"}
        verdict = verify_engine(engine, SHARED)
        assert verify_engine(engine, SHARED).violations[0].check == "E6"  # a fresh worker
    finally:
        engine.stop()
    (v,) = verdict.violations
    assert v.check == "E6" and said in v.message and v.call == "postprocess()", v


def test_isolated_and_in_process_traces_are_the_same(correct: LocalEngine) -> None:
    engine = IsolatedEngine(NANO, read_setup(str(CORRECT)))
    try:
        assert engine.run(SHARED) == correct.run(SHARED)
        assert engine.setup.runner == correct.setup.runner == "chunked"
    finally:
        engine.stop()


def test_a_package_the_engine_imports_but_is_missing_is_a_usage_error(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    root = _engine_with(tmp_path, "\n\nimport schedcheck_no_such_package  # noqa\n")
    assert main(["engine", str(root)]) == faults.USAGE
    assert "imports schedcheck_no_such_package, which is not installed" in capfd.readouterr().err


# nano-vllm's block hash: xxh64 over the token ids as a numpy array, chained.
NANO_HASH = """

import numpy as np
import xxhash


def _compute_hash(token_ids, prefix=-1):
    h = xxhash.xxh64()
    if prefix != -1:
        h.update(prefix.to_bytes(8, "little"))
    h.update(np.array(token_ids).tobytes())
    return h.intdigest()


BlockManager.compute_hash = staticmethod(_compute_hash)
"""
REQUIRE_EXTRA = "SCHEDCHECK_REQUIRE_NANOVLLM"


@pytest.mark.nanovllm
def test_an_engine_that_hashes_as_nano_vllm_does_runs_in_its_box(tmp_path: Path) -> None:
    """xxhash and numpy (the [nanovllm] extra) are imported before the box is entered:
    inside, the interpreter's packages are out of reach. Skipped without the extra, except
    in .ci/run, which installs it and sets SCHEDCHECK_REQUIRE_NANOVLLM."""
    try:
        import numpy  # noqa: F401
        import xxhash  # noqa: F401
    except ImportError as e:
        if os.environ.get(REQUIRE_EXTRA):
            pytest.fail(f"{e}; {REQUIRE_EXTRA} is set, so this test must run")
        pytest.skip(f"{e} (python -m pip install -e '.[nanovllm]')")
    root = tmp_path / "fork"
    shutil.copytree(CORRECT, root)
    manager = root / "nanovllm" / "engine" / "block_manager.py"
    manager.write_text(manager.read_text() + NANO_HASH)
    engine = IsolatedEngine(NANO, read_setup(str(root)))
    try:
        found = search_engine(engine, examples=200)
    finally:
        engine.stop()
    assert found.failure is None, found.failure[1].report()
    assert found.reached["prefix-cache hit"] > 0


@pytest.mark.parametrize("where", [[], ["--in-process"]], ids=["isolated", "in-process"])
def test_an_engine_that_raises_on_import_fails_e6_not_ours(
    tmp_path: Path, where: list[str], capfd: pytest.CaptureFixture[str]
) -> None:
    root = _engine_with(tmp_path, "\n\nraise RuntimeError('boom at import')\n")
    assert main(["engine", str(root), *where]) == faults.FAIL
    out = capfd.readouterr().out
    assert "E6: the engine raised while it was loaded" in out and "boom at import" in out


def test_an_engine_that_raises_at_import_is_named_an_engine_not_a_submission(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its import runs in its worker; the report says the engine could not be loaded (E6,
    nano-vllm's own fault), in the words of an engine, not of a student's file."""
    broken = tmp_path / "broken"
    shutil.copytree(CORRECT, broken)
    with (broken / "nanovllm" / "engine" / "scheduler.py").open("a") as f:
        f.write('\nraise RuntimeError("boom at import")\n')
    assert main(["engine", str(broken), "--examples", "5"]) == faults.FAIL
    out = capsys.readouterr().out
    assert "the engine could not be loaded: RuntimeError: boom at import" in out
    assert "submission" not in out


def test_speculative_decoding_is_drawn_by_default_where_the_engine_drives_it() -> None:
    """Issue 49: with no --features, a search draws speculative decoding wherever the
    engine's adapter drives it; `none` leaves it out, `spec` asks for it (a usage error
    where the adapter does not drive it), and an unknown name is named."""
    drives = Features(drafts=4, draft_modes=("sync-v2",))
    assert drawn(drives, None, "vLLM").drafts == 4
    assert drawn(drives, "spec", "vLLM").drafts == 4
    assert drawn(drives, "none", "vLLM").drafts == 0
    assert drawn(Features(), None, "SGLang").drafts == 0
    with pytest.raises(ValueError, match="does not drive SGLang's speculative decoding"):
        drawn(Features(), "spec", "SGLang")
    with pytest.raises(ValueError, match="'eagle' is no feature"):
        drawn(drives, "eagle", "vLLM")


def test_one_rank_pickles_nothing_so_e8_does_not_apply() -> None:
    """E8 reads the copy a tensor-parallel worker gets: with `--config
    tensor_parallel_size=1` there is none, and the workload on which a form of its own
    fails E8 with two ranks passes (the pickle rule is this mutant's only bug)."""
    mutant = next(m for m in MUTANTS if m.stem == "pickle_lacks_tokens")
    found = search_engine(LocalEngine(NANO, read_setup(str(checkout(mutant)))), examples=300)
    assert found.failure is not None, "the search found no E8"
    w, verdict = found.failure
    assert verdict.violations[0].check == "E8", verdict.report()
    one = read_setup(str(checkout(mutant)), config=["tensor_parallel_size=1"])
    assert verify_engine(LocalEngine(NANO, one), w).ok


def test_the_loop_checks_pickled_copies_whatever_the_fork_s_config_py_defaults_to() -> None:
    """Two ranks unless --config says otherwise, not the fork's own default (1 in nearly
    every config.py): the same mutant assembled whole, its config.py saying 1, fails E8
    on the workload above (this gave a false PASS on 2026-12-04, between 9c76452 and the
    fix: the loop read config.py's default)."""
    mutant = next(m for m in MUTANTS if m.stem == "pickle_lacks_tokens")
    whole = checkout(mutant, whole=True)
    assert "tensor_parallel_size: int = 1" in (whole / "nanovllm" / "config.py").read_text()
    found = search_engine(LocalEngine(NANO, read_setup(str(checkout(mutant)))), examples=300)
    assert found.failure is not None
    setup = read_setup(str(whole), loop="scheduler")
    verdict = verify_engine(LocalEngine(NANO, setup), found.failure[0])
    assert [v.check for v in verdict.violations][:1] == ["E8"], verdict.report()
