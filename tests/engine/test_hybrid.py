"""A hybrid model in vLLM (issue 51): a run of vLLM 0.34.0's real Scheduler with its
hybrid KV cache manager, laid out by its own planner (engine/vllm/hybrid.py), recorded here
(tests/engine_subjects/vllm/hybrid_trace.json: plain data, no vLLM needed), quiet under
every check, and broken one way at a time: E2 fires on a window's block freed while the
window still reads it, E3 on a block two groups hold at once. With vLLM installed (marked
`vllm`): the run's workload replayed on the release passes (as recorded, and in sync mode), and
on a mutant whose window manager frees one token too early, E2 fires (sync mode: async
scheduling frees on the tokens processed, which hides it).

The recorded run (async-v2, 16 blocks of 2, budget 4, two running; layers: full attention
and a sliding window of 3 tokens): r1 [1 2 1 2 1] decodes six tokens; r2 [1 2 1 2 1 1]
arrives at step 2 and hits r1's first two blocks (the window's first as the null block);
r3 [2 1] arrives at step 3 and waits for a slot. The window group frees the blocks that
slid out of it (the null block, 0, in their place), and the full-attention group is handed
them next: one pool.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from schedcheck.engine.adapter import EngineSetup
from schedcheck.engine.checks import check_engine
from schedcheck.engine.command import drawn, narrowed
from schedcheck.engine.export import export_test
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.search import search_engine
from schedcheck.engine.strategies import (
    HYBRID,
    LAYER_FREED,
    LAYER_HANDED_ON,
    LAYER_HIT,
    LAYER_REPREFILL,
    LAYER_SHORTENED,
    STATE_HIT,
    STATE_SPLIT,
    labels,
    observe,
)
from schedcheck.engine.trace import UNDRIVABLE, EngineStep, EngineTrace
from schedcheck.engine.verdict import EngineVerdict
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.engine.vllm.config import vllm_setup
from schedcheck.engine.vllm.hybrid import LayoutRefused, hybrid_config
from schedcheck.engine.workload import EngineWorkload
from schedcheck.invariants.violation import Violation
from tests.engine.recorded_runs import CHECKS, at, fired
from tests.engine.recorded_runs import recorded as recorded_run
from tests.engine.vllm_engine import local_vllm
from tests.engine_subjects.exported import run_exported
from tests.engine_subjects.vllm.mutants import window_frees_inside

FINDINGS = Path(__file__).resolve().parent.parent.parent / "findings"


def recorded() -> EngineTrace:
    return recorded_run("hybrid_trace.json")


def test_the_recorded_run_is_what_the_docstring_says_and_every_check_holds() -> None:
    trace = recorded()
    assert trace.workload.layers == ("window:3",) and check_engine(trace, CHECKS) == []
    step2 = {s.name: s for s in trace.steps[1].scheduled}
    assert step2["r2"].block_table[:2] == step2["r1"].block_table[:2]  # r2's prefix hit
    assert step2["r2"].groups[0][0] == 0  # the window's first block: the null block
    # a block the window freed is handed to full attention next
    window = {b for s in trace.steps for x in s.scheduled for g in x.groups for b in g} - {0}
    full = {b for s in trace.steps for x in s.scheduled for b in x.block_table}
    assert window & full, (window, full)
    again = EngineTrace.from_dict(json.loads(json.dumps(trace.to_dict())))
    assert again == trace


def test_the_run_reaches_a_freed_window_block_and_a_block_handed_to_another_group() -> None:
    assert {LAYER_FREED, LAYER_HANDED_ON} <= observe(recorded())
    assert set(HYBRID) <= set(labels(replace(VLLM.features, layers=("window",))))
    assert not set(HYBRID) & set(labels(replace(VLLM.features, layers=())))
    # a Mamba layer's labels only where one is drawn; a window's hit only where one is
    only_states = set(labels(replace(VLLM.features, layers=("mamba",))))
    assert {STATE_HIT, STATE_SPLIT} <= only_states and LAYER_HIT not in only_states
    assert not {STATE_HIT, STATE_SPLIT} & set(labels(replace(VLLM.features, layers=("window",))))


def test_hybrid_models_are_drawn_by_default_and_where_named_and_refused_where_none() -> None:
    assert drawn(VLLM.features, None, "vLLM").layers == VLLM.features.layers
    assert drawn(VLLM.features, "hybrid", "vLLM").layers == VLLM.features.layers
    assert drawn(VLLM.features, "spec", "vLLM").layers == ()
    assert drawn(VLLM.features, "none", "vLLM").layers == ()
    with pytest.raises(ValueError, match="--features hybrid: schedcheck drives no hybrid"):
        drawn(replace(VLLM.features, layers=()), "hybrid", "vLLM")


def test_a_hybrid_model_s_run_is_exported_with_its_groups_laid_out_by_the_planner() -> None:
    """The test builds the model's groups as the run did: LAYERS, and vLLM's own planner
    called on them (hybrid_kv_cache_config). E3 (and E2, E8) of such a run is refused, the
    reason said: the test's state keeps full attention's group only."""
    trace = recorded()
    setup = EngineSetup(root="/nowhere", package="vllm", runner="v2", runner_from="the test")
    rendered = VLLM.render(setup, trace)
    assert not isinstance(rendered, str) and rendered.layers
    verdict = EngineVerdict(trace, [Violation("E5", 3, "end of run", "as the test says")])
    text = export_test(verdict, rendered, "vLLM", "schedcheck engine --engine vllm")
    assert "LAYERS = ['window:3']" in text
    assert "kv_cache_config = hybrid_kv_cache_config(vllm_config, spec)" in text
    assert "get_global_kv_cache_groups" in text and "KVCacheGroupSpec([" not in text
    compile(text, "exported", "exec")
    e3 = EngineVerdict(trace, [Violation("E3", 3, "schedule()", "as the test says")])
    with pytest.raises(ValueError, match="E3 of a hybrid model's run reads every KV cache group"):
        export_test(e3, rendered, "vLLM", "schedcheck engine --engine vllm")
    plain = replace(rendered, layers=False)  # an engine whose test builds no hybrid model
    with pytest.raises(ValueError, match="the workload's model is hybrid"):
        export_test(verdict, plain, "vLLM", "schedcheck engine --engine vllm")


def test_e2_fires_on_a_window_block_freed_while_the_window_reads_it() -> None:
    # step 5: r1 computes position 7; its window of 3 reads 5..7, and position 5 is in
    # block 6 (positions 4, 5), which the break frees (the null block in its place)
    def freed(step: EngineStep) -> EngineStep:
        scheduled = tuple(
            s._replace(groups=((0, 0, 0, 11),)) if s.name == "r1" else s for s in step.scheduled
        )
        return EngineStep(
            step.step,
            step.is_prefill,
            scheduled,
            step.copies,
            step.sampled,
            step.after_schedule,
            step.after_postprocess,
            step.schedules,
            step.draft_stats,
        )

    found = fired(at(recorded(), 5, freed), "E2")
    assert found and found[0].step == 5, found
    assert "r1's window:3 layer attends to position 5 at slot 1" in found[0].message


def test_e3_fires_on_a_block_two_groups_hold_at_once() -> None:
    def shared(step: EngineStep) -> EngineStep:
        pool = step.after_postprocess
        assert pool is not None
        groups = dict(pool.groups)
        full = pool.tables["r3"]
        groups["r3"] = ((full[0], *groups["r3"][0][1:]),)  # r3's full block as its window's
        return EngineStep(
            step.step,
            step.is_prefill,
            step.scheduled,
            step.copies,
            step.sampled,
            step.after_schedule,
            pool._replace(groups=groups),
            step.schedules,
        )

    found = fired(at(recorded(), 8, shared), "E3")
    assert found and "is held by KV cache groups 0 and 1 at once" in found[0].message, found


@pytest.fixture(scope="module")
def vllm() -> Iterator[LocalEngine]:
    yield from local_vllm(
        argparse.Namespace(async_scheduling=None, runner=None, modes="all", features="hybrid"),
        lambda s: "async-v2" in s.modes,
        "this release has no async-v2 mode",
    )


@pytest.mark.vllm
def test_the_release_passes_the_run_and_a_window_freed_too_early_is_e2(
    vllm: LocalEngine,
) -> None:
    workload = recorded().workload
    assert check_engine(vllm.run(workload), CHECKS) == []
    # in sync mode: async scheduling frees on the tokens processed, one behind, which
    # hides a count one token too many
    workload = replace(workload, config=replace(workload.config, mode="sync-v2"))
    assert check_engine(vllm.run(workload), CHECKS) == []
    build = vllm.loaded.build
    build.patch = window_frees_inside
    try:
        found = check_engine(vllm.run(workload), CHECKS)
    finally:
        build.patch = None
    assert found and found[0].check == "E2", found
    assert "window:3 layer attends to position" in found[0].message, found[0].message


@pytest.mark.vllm
def test_a_setup_draws_hybrid_models_by_default_where_the_planner_takes_them(
    vllm: LocalEngine,
) -> None:
    """As deployed: where the release's planner lays hybrid models out, a search (and a
    test's setup.features()) draws them unless --features leaves them out."""
    plain = argparse.Namespace(async_scheduling=None, runner=None, modes="all", features="")
    assert vllm_setup(None, plain).layers == vllm.setup.layers
    spec = argparse.Namespace(async_scheduling=None, runner=None, modes="all", features="spec")
    assert vllm_setup(None, spec).layers == ()
    assert vllm.setup.layers == VLLM.features.layers or not vllm.setup.layers


@pytest.mark.vllm
def test_the_release_passes_a_bounded_search_with_hybrid_models_drawn(vllm: LocalEngine) -> None:
    """--features hybrid: a window, a chunk or a Mamba layer beside full attention in a
    third of the workloads, every check holds, and a freed block, a block handed on, a
    window's hit, a Mamba state's hit and an aligned split are reached (0.22 to 0.34 pass
    1,000 in every mode, with E13 off below 0.33: VLLM-03 comes first there)."""
    if not vllm.setup.layers:
        pytest.skip("this release's planner lays out no hybrid model here")
    features = replace(
        vllm.setup.features(VLLM.features), drafts=0, connectors=(), load_failures=(), sessions=0
    )
    checks = [c for c in CHECKS if c != "E13"] if release() < (0, 33) else list(CHECKS)
    found = search_engine(vllm, 300, checks, True, features, vllm.setup.modes)
    assert found.failure is None, found.failure[1].report() if found.failure else ""
    for label in (LAYER_FREED, LAYER_HANDED_ON, LAYER_HIT, STATE_HIT, STATE_SPLIT):
        assert found.reached[label] > 0, (label, found.reached)


def release() -> tuple[int, ...]:
    import vllm as installed

    return tuple(int(x) for x in installed.__version__.split(".")[:2])


def _planner(raises: BaseException) -> SimpleNamespace:
    """vLLM's names as hybrid_config reads them, its planner raising `raises` (0.34's shape:
    grouping a step of its own)."""

    def spec(**fields: object) -> SimpleNamespace:
        return SimpleNamespace(page_size_bytes=8, **fields)

    def refuse(*_: object) -> None:
        raise raises

    return SimpleNamespace(
        SlidingWindowSpec=spec,
        ChunkedLocalAttentionSpec=spec,
        kv_cache_utils=None,
        kv_cache_planning=SimpleNamespace(get_global_kv_cache_groups=refuse),
    )


def test_a_valid_layout_the_planner_refuses_is_e6_at_build_and_an_unlaid_kind_no_mode() -> None:
    """A ValueError (or assert) of the planner on a layout whose pool holds a request of
    max_model_len in every group is the release's (LayoutRefused: raised where the
    Scheduler is built, inside the run's call, so E6); a NotImplementedError says the
    release does not lay out that kind (the mode's refusal, never a verdict)."""
    workload = recorded().workload
    config = SimpleNamespace(
        scheduler_config=SimpleNamespace(disable_hybrid_kv_cache_manager=True),
        cache_config=SimpleNamespace(),
    )
    full = SimpleNamespace(block_size=2, num_kv_heads=1, head_size=1, dtype=None, page_size_bytes=8)

    class NoMode(RuntimeError):
        pass

    with pytest.raises(LayoutRefused, match=r"refuses the layout \['full', 'window:3'\].*Cannot"):
        hybrid_config(workload, config, full, NoMode, _planner(ValueError("Cannot fit")))
    with pytest.raises(NoMode, match=r"does not lay out \['window:3'\]: not yet"):
        hybrid_config(workload, config, full, NoMode, _planner(NotImplementedError("not yet")))
    assert not issubclass(LayoutRefused, NoMode)


def test_a_hit_the_window_lacked_is_shortened_and_reached_so() -> None:
    """The recorded run hybrid_short_trace.json (0.34.0, async-v2, a window of 2, blocks of
    2): r2 [2 1 1] computes positions 0..3 and finishes; full attention caches block 3 as
    the prefix [2 1 1 1], the window caches no block of it (0.29 on hashes a window's
    blocks only at the boundaries it may be asked for). r3 [2 1 1 1 1] then hits 2 tokens,
    not 4: the window lacked what full attention held. Quiet where full attention held no
    more (block 3 out of the cache's index)."""
    trace = recorded_run("hybrid_short_trace.json")
    assert trace.workload.layers == ("window:2",) and check_engine(trace, CHECKS) == []
    r3 = next(s for step in trace.steps for s in step.scheduled if s.name == "r3")
    assert r3.num_cached == 2 and r3.token_ids == (2, 1, 1, 1, 1)
    seen = observe(trace)
    assert {LAYER_SHORTENED, LAYER_HIT} <= seen and LAYER_REPREFILL not in seen

    def without_block_3(step: EngineStep) -> EngineStep:
        after = step.after_postprocess
        if after is None:
            return step
        index = tuple(x for x in after.cache_index if x[1] != 3)
        return replace(step, after_postprocess=after._replace(cache_index=index))

    held_no_more = replace(trace, steps=[without_block_3(s) for s in trace.steps])
    assert LAYER_SHORTENED not in observe(held_no_more)
    # a hit whose window blocks are all the null block is no window hit
    nulls = [
        replace(
            s, scheduled=tuple(x._replace(groups=((0,) * len(x.groups[0]),)) for x in s.scheduled)
        )
        for s in trace.steps
    ]
    assert LAYER_HIT not in observe(replace(trace, steps=nulls))


def test_a_mamba_state_hit_read_where_its_prefix_left_it_and_broken_is_e2() -> None:
    """The recorded run mamba_trace.json (0.34.0, async-v2, a Mamba layer beside full
    attention, blocks of 2): r4 [2 1 1] is prefilled in two chunks, cut at the block
    boundary 2 (0.34 cuts a prompt at (L - 1) // B * B, so its state there is cached):
    its Mamba state of [2 1] in block 1, cached; r5 [2 1 1] then hits 2 tokens and starts
    from that state, in block 1 of its own table. Broken: r5 reads its state from the
    block r4's last chunk wrote (the state of all three tokens), E2."""
    trace = recorded_run("mamba_trace.json")
    assert trace.workload.layers == ("mamba",) and check_engine(trace, CHECKS) == []
    assert {STATE_HIT, STATE_SPLIT} <= observe(trace)
    r4 = [s for step in trace.steps for s in step.scheduled if s.name == "r4"]
    assert [(s.num_cached, s.num_scheduled, s.groups) for s in r4] == [
        (0, 2, ((1,),)),
        (2, 1, ((1, 4),)),
    ]
    (r5,) = [(step.step, s) for step in trace.steps for s in step.scheduled if s.name == "r5"]
    assert r5[1].num_cached == 2 and r5[1].groups == ((1, 3),)

    def reads_block_4(step: EngineStep) -> EngineStep:
        scheduled = tuple(
            s._replace(groups=((4, 3),)) if s.name == "r5" else s for s in step.scheduled
        )
        return replace(step, scheduled=scheduled)

    broken = replace(trace, steps=tuple(reads_block_4(s) for s in trace.steps))
    (v,) = fired(broken, "E2")
    assert (
        v.step == r5[0]
        and (
            "r5's mamba layer starts from the state of its first 2 tokens, at block 4 (index 0) of "
            "its group 1 block table [4, 3], which holds the state of [2 1 1]"
        )
        in v.message
    )


@pytest.mark.vllm
def test_the_release_passes_the_mamba_run_in_both_modes(vllm: LocalEngine) -> None:
    """The Mamba run's workload replayed (its layout by the release's planner, its mode
    and block size as a hybrid Mamba model's hook sets them): every check holds, and the
    state hit and the aligned split are reached again."""
    if "mamba" not in vllm.setup.layers:
        pytest.skip("this release's planner lays out no Mamba layer here")
    workload = recorded_run("mamba_trace.json").workload
    for mode in ("async-v2", "sync-v2"):
        trace = vllm.run(replace(workload, config=replace(workload.config, mode=mode)))
        assert check_engine(trace, CHECKS) == [], mode
        assert {STATE_HIT, STATE_SPLIT} <= observe(trace), mode


def test_layers_keeps_the_kinds_it_names_and_refuses_one_not_drawn() -> None:
    """--layers narrows the kinds of layer a search draws (each one drawn; a usage error
    naming the option and the value otherwise)."""
    kept = narrowed(VLLM.features, argparse.Namespace(layers="mamba,window"))
    assert kept.layers == ("window", "mamba")
    with pytest.raises(ValueError, match=r"--layers linear: 'linear' is not drawn here"):
        narrowed(VLLM.features, argparse.Namespace(layers="linear"))
    plain = replace(VLLM.features, layers=())
    with pytest.raises(ValueError, match=r"none: --features hybrid, where the engine has one"):
        narrowed(plain, argparse.Namespace(layers="mamba"))


@pytest.mark.vllm
def test_a_mamba_run_s_export_builds_its_groups_on_the_release(
    vllm: LocalEngine, tmp_path: Path
) -> None:
    """The Mamba run exported (its E5 property, which holds there): the test lays out the
    Mamba group with vLLM's planner in align mode and runs to its end on the release."""
    if "mamba" not in vllm.setup.layers:
        pytest.skip("this release's planner lays out no Mamba layer here")
    trace = recorded_run("mamba_trace.json")
    verdict = EngineVerdict(trace, [Violation("E5", 13, "end of run", "as the test says")])
    rendered = VLLM.render(vllm.setup, trace)
    assert not isinstance(rendered, str)
    test = tmp_path / "test_mamba.py"
    test.write_text(export_test(verdict, rendered, "vLLM", "schedcheck engine --engine vllm"))
    assert "LAYERS = ['mamba']" in test.read_text()
    done = run_exported([test], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]


@pytest.mark.vllm
def test_chunked_local_attention_with_a_hidden_state_drafter_is_no_mode_of_the_release(
    vllm: LocalEngine,
) -> None:
    """VllmConfig turns the hybrid manager off for chunked local attention with EAGLE
    (0.26's manager asserts the pair unsupported): a replay of the pair is refused, named,
    never run as a hybrid model vLLM would not run."""
    workload = replace(recorded().workload, layers=("chunk:2",), drafts=1, drafter="hidden")
    failure = vllm.run(workload).failure
    assert failure is not None and failure.check == UNDRIVABLE, failure
    assert "without its hybrid KV cache manager" in failure.message, failure


@pytest.mark.vllm
def test_vllm_23_a_rejected_draft_reads_a_window_block_freed_on_its_count(
    vllm: LocalEngine,
) -> None:
    """findings/VLLM_23.json (docs/findings.md): async-v1, a window of 2, EAGLE. 0.22 to
    0.25 free a window's blocks on num_computed_tokens, the in-flight draft counted; the
    draft rejected, the step after reads position 1 in the freed block (E2 at step 11).
    0.26 frees on the tokens processed (#47728) and passes. Run as a user runs it."""
    replay = FINDINGS / "VLLM_23.json"
    saved = EngineWorkload.from_json(replay.read_text())
    if saved.config.mode not in vllm.setup.modes:
        pytest.skip(f"this release has no mode {saved.config.mode}")
    command = [sys.executable, "-m", "schedcheck", "engine", "--engine", "vllm"]
    done = subprocess.run(
        [*command, "--features", "spec,hybrid", "--modes", "all", "--replay", str(replay)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if release() < (0, 26):
        assert done.returncode == 1, done.stdout + done.stderr
        assert "E2 at step 11" in done.stdout
        assert "r5's window:2 layer attends to position 1 at slot 1" in done.stdout
    else:
        assert done.returncode == 0, done.stdout + done.stderr
