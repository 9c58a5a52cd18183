"""The checks as they read SGLang's state (E3 over its pages, radix tree and rows; E14, its
retraction), on a trace of SGLang 0.5.23's real scheduler recorded here
(tests/engine_subjects/sglang/trace.json, plain data: no SGLang needed to run these), and
on that trace broken one way at a time: each check stays quiet on the first and fires on
its own break. Also what the adapter reads off SGLang's files, and its intake's rule.

The recorded run (the normal loop; 16 slots in pages of 1, page 0 SGLang's padding;
max_running_requests 3, chunked_prefill_size 12, schedule_conservativeness 0.3; no eos):
r1, r2, r3 (prompts [1 2 1 i], 8 tokens each) arrive at step 1; r1 prefills at step 1; r2
finds r1's [1 2 1] in the radix tree at step 2; r3 is not admitted (the pool is reserved);
r1 and r2 decode until, at step 8, the pool has no slot for both: r2 (the same output
count and prompt length as r1, later in the batch) is retracted and goes to the tail of
the waiting queue, behind r3; r1 finishes, r3 runs, then r2 is prefilled again over the
tree's copy of its prefix.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from schedcheck.engine.adapter import SetupError
from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.command import unsupported
from schedcheck.engine.sglang.adapter import ADAPTER as SGLANG_ADAPTER
from schedcheck.engine.sglang.config import overlaps_by_default, sglang_setup
from schedcheck.engine.trace import EngineStep, EngineTrace, Pool
from schedcheck.engine.workload import (
    EngineConfig,
    EngineRequest,
    EngineWorkload,
    Headroom,
)
from schedcheck.invariants.violation import Violation

TRACE = Path(__file__).resolve().parent.parent / "engine_subjects" / "sglang" / "trace.json"
CHECKS = active(on=frozenset({"E14"}))  # SGLang's adapter turns E14 on
SGLANG = Headroom(pages=1, tokens=1, prompt=7)  # its adapter's


def recorded() -> EngineTrace:
    return EngineTrace.from_dict(json.loads(TRACE.read_text()))


def fired(trace: EngineTrace) -> list[Violation]:
    return check_engine(trace, CHECKS)


def pool_of(trace: EngineTrace, step: int, which: str = "after_postprocess") -> Pool:
    s: EngineStep = trace.steps[step - 1]
    pool = getattr(s, which)
    assert isinstance(pool, Pool)
    return pool


def with_pool(trace: EngineTrace, step: int, which: str, pool: Pool) -> EngineTrace:
    steps = list(trace.steps)
    steps[step - 1] = replace(steps[step - 1], **{which: pool})
    return replace(trace, steps=tuple(steps))


def test_the_recorded_run_is_what_the_docstring_says_and_every_check_holds() -> None:
    trace = recorded()
    assert fired(trace) == []
    assert trace.workload.config.conservativeness == 0.3
    second = trace.steps[1].scheduled[0]
    assert (second.name, second.num_cached, second.num_scheduled) == ("r2", 3, 1)
    assert second.block_table[:3] == trace.steps[0].scheduled[0].block_table[:3]
    assert pool_of(trace, 7).running == ("r1", "r2")
    assert pool_of(trace, 8, "after_schedule").status["r2"] == "WAITING"
    assert pool_of(trace, 8, "after_schedule").waiting == ("r3", "r2")
    assert pool_of(trace, 8, "after_schedule").reserved == (0,)
    assert trace.outputs == {r.name: trace.workload.alone(r) for r in trace.workload.requests}


def test_e14_fires_on_a_retracted_request_requeued_at_the_head() -> None:
    trace = recorded()
    pool = pool_of(trace, 8, "after_schedule")
    broken = with_pool(trace, 8, "after_schedule", pool._replace(waiting=("r2", "r3")))
    (v,) = [v for v in fired(broken) if v.check == "E14"]
    assert v.step == 8 and "tail of the waiting queue" in v.message


def test_e14_fires_on_the_wrong_victim() -> None:
    """Had r1 one output token fewer than r2 before step 8, r1 had to go, not r2."""
    trace = recorded()
    pool = pool_of(trace, 7)
    tokens = dict(pool.tokens)
    tokens["r1"] = tokens["r1"][:-1]
    broken = with_pool(trace, 7, "after_postprocess", pool._replace(tokens=tokens))
    (v,) = [v for v in fired(broken) if v.check == "E14"]
    assert v.step == 8 and "fewest output" in v.message


def test_e3_fires_on_a_tree_lock_no_request_holds() -> None:
    """At step 3 r1 and r2 lock the tree's pages of [1 2 1]: a lock count one over."""
    trace = recorded()
    pool = pool_of(trace, 3)
    shared = trace.steps[2].scheduled[0].block_table[0]
    blocks = list(pool.blocks)
    assert blocks[shared].ref_count == 2
    blocks[shared] = blocks[shared]._replace(ref_count=3)
    broken = with_pool(trace, 3, "after_postprocess", pool._replace(blocks=tuple(blocks)))
    (v,) = [v for v in fired(broken) if v.check == "E3"]
    assert "ref_count 3" in v.message and "2 block table(s)" in v.message


def test_e3_fires_on_a_tree_page_that_is_also_free() -> None:
    trace = recorded()
    pool = pool_of(trace, 10)
    evictable = pool.cached[0]
    broken = with_pool(trace, 10, "after_postprocess", pool._replace(free=(*pool.free, evictable)))
    (v,) = [v for v in fired(broken) if v.check == "E3"]
    assert f"block {evictable} is both free and cached" in v.message


def test_e2_and_e3_fire_on_a_tree_page_naming_another_prefix() -> None:
    """The tree's page 1 names [3]: its KV is [1]'s (E2), and r1 holds it over [1] (E3)."""
    trace = recorded()
    pool = pool_of(trace, 3)
    page = trace.steps[2].scheduled[0].block_table[0]
    blocks = list(pool.blocks)
    blocks[page] = blocks[page]._replace(token_ids=(3,))
    broken = with_pool(trace, 3, "after_postprocess", pool._replace(blocks=tuple(blocks)))
    e2, e3 = fired(broken)
    assert e2.check == "E2" and "slot 1 holds position 0 of [1]" in e2.message
    assert e3.check == "E3" and "r1 holds block 1 as its block 0" in e3.message


def test_the_release_default_loop_is_read_off_either_declaration(tmp_path: Path) -> None:
    groups = tmp_path / "new" / "srt" / "arg_groups" / "fields"
    groups.mkdir(parents=True)
    (groups / "schedule.py").write_text(
        "    disable_overlap_schedule: A[\n        bool,\n        Arg(\n"
        '            help="Disable the overlap scheduler.",\n            resolvable=True,\n'
        "        ),\n    ] = False\n"
    )
    assert overlaps_by_default(tmp_path / "new")
    old = tmp_path / "old" / "srt"
    old.mkdir(parents=True)
    (old / "server_args.py").write_text("    disable_overlap_schedule: bool = True\n")
    assert not overlaps_by_default(tmp_path / "old")
    with pytest.raises(SetupError, match="declares no disable_overlap_schedule"):
        overlaps_by_default(tmp_path)


def test_sglangs_intake_rule_what_a_request_needs_of_the_pool() -> None:
    """Its allocator clips max_new_tokens to the pool less the prompt rounded up to a page,
    a page and a slot; it refuses a prompt of the pool less 6 slots or more."""
    assert SGLANG_ADAPTER.features.headroom == SGLANG
    assert SGLANG.slots(prompt=4, max_tokens=8, block_size=1) == 4 + 8 + 1 + 1
    assert SGLANG.slots(prompt=5, max_tokens=2, block_size=4) == 8 + 2 + 4 + 1
    assert SGLANG.slots(prompt=9, max_tokens=1, block_size=1) == 9 + 7  # the prompt's rule
    one = EngineRequest("r1", (1, 2, 1, 1), 8)
    fits = EngineWorkload(EngineConfig(15, 1, 1, 4), (one,))
    assert fits.problems(1, SGLANG, 1, True) == []
    short = EngineWorkload(EngineConfig(14, 1, 1, 4), (one,))
    assert "r1 needs 14 KV blocks" in short.problems(1, SGLANG, 1, True)[0]
    odd = EngineWorkload(EngineConfig(9, 2, 1, 3), (EngineRequest("r1", (1,), 1),))
    assert any("not a whole number of blocks" in p for p in odd.problems(1, SGLANG, 1, True))


def test_a_release_whose_paged_allocator_has_no_cpu_path_runs_pages_of_one(
    tmp_path: Path,
) -> None:
    """0.5.21 and before call the paged allocator's triton kernels whatever the device: the
    setup runs pages of 1 only, says so, and refuses a saved workload of pages of 2."""
    srt = tmp_path / "sglang" / "srt"
    for folder in ("managers", "arg_groups/fields", "mem_cache/allocator"):
        (srt / folder).mkdir(parents=True)
    (srt / "managers" / "scheduler.py").write_text("class Scheduler: ...\n")
    (srt / "arg_groups" / "fields" / "schedule.py").write_text(
        "    disable_overlap_schedule: bool = False\n"
    )
    paged = srt / "mem_cache" / "allocator" / "paged.py"
    paged.write_text("def alloc_extend(self): alloc_extend_kernel[(bs,)](...)\n")
    setup = sglang_setup(str(tmp_path))
    assert setup.block_sizes == (1,)
    assert setup.features(SGLANG_ADAPTER.features).block_sizes == (1, 1)
    assert any(line.startswith("pages: of 1 slot only") for line in SGLANG_ADAPTER.header(setup))
    two = EngineWorkload(EngineConfig(9, 2, 1, 2), (EngineRequest("r1", (1,), 1),))
    assert (
        "block size 2, which this setup does not run with"
        in unsupported(
            two, setup.features(SGLANG_ADAPTER.features), setup.modes, setup.block_sizes
        )[0]
    )
    paged.write_text("self.use_triton_kernels = capabilities.supports_triton\n")
    assert sglang_setup(str(tmp_path)).block_sizes == ()
    assert sglang_setup(str(tmp_path)).features(SGLANG_ADAPTER.features).block_sizes == (1, 4)


def test_e14_reads_a_session_s_turn_by_its_own_prompt_and_output() -> None:
    """A session's turn is ordered by the turn's prompt (its whole history) and its own
    output, as SGLang orders a request of the session: read so, r1 as a session two turns
    in (3 tokens a turn, [2] sent after the first) had 2 output tokens to r2's 6 at step 8,
    so r1 had to go, not r2; read as one request from its first prompt it was a tie."""
    trace = recorded()
    r1, *rest = trace.workload.requests
    assert r1.name == "r1" and fired(trace) == []
    session = replace(r1, max_tokens=3, chunks=((1, (2,)),))
    sessions = replace(trace.workload, requests=(session, *rest))
    kept = replace(trace, workload=sessions, traits=replace(trace.traits, turn_keeps_last=True))
    (v,) = [v for v in fired(kept) if v.check == "E14"]
    assert v.step == 8 and "r1 2 output, prompt 8, r2 6 output, prompt 4" in v.message
