"""A failure exported as a test in the engine's own idiom (issue 48; engine/export.py): the file
imports no schedcheck, runs with pytest alone from the engine's checkout, fails on the engine
it was found in and passes on the engine that bug was put into (a mutant and its correct
engine; nano-vllm's and the toy engine's renderings), and says why where it writes none."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from schedcheck import faults
from schedcheck.cli.main import main
from schedcheck.engine import registry
from schedcheck.engine.checks import check_engine
from schedcheck.engine.export import fires, module_constants
from schedcheck.engine.properties import POOL_PROBLEM, plain_pool, problem
from schedcheck.engine.trace import Block, EngineTrace, Pool
from tests.engine_subjects.catalogue import CORRECT, MUTANTS, SHAPES, checkout
from tests.engine_subjects.exported import run_exported

# A nano-vllm checkout has a config.py (the engine written here leaves it to the checker):
# the exported test imports the fork's scheduler, which imports its Config
CONFIG = """from dataclasses import dataclass


@dataclass
class Config:
    model: str = "."
    max_num_batched_tokens: int = 16384
    max_num_seqs: int = 512
    max_model_len: int = 4096
    eos: int = -1
    kvcache_block_size: int = 256
    num_kvcache_blocks: int = -1
"""


def repository(root: Path, into: Path) -> Path:
    """A copy of the checkout `root` as its repository holds it: with a config.py, and a
    package __init__ that imports the whole engine, which is not installed here (torch,
    transformers, flash-attn: nano-vllm's imports its LLM)."""
    shutil.copytree(root, into, ignore=shutil.ignore_patterns("__pycache__"))
    config = into / "nanovllm" / "config.py"
    if not config.exists():
        config.write_text(CONFIG)
    (into / "nanovllm" / "__init__.py").write_text("import flash_attn_not_installed_here\n")
    return into


def run_test(test: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The exported test run as its maintainers would: pytest alone, from the checkout."""
    return run_exported([test.resolve()], cwd, timeout=120)


def export(args: list[str], out: Path, capfd: pytest.CaptureFixture[str]) -> str:
    capfd.readouterr()
    assert main([*args, "--in-process", "--export", str(out)]) == faults.FAIL
    said = capfd.readouterr().out
    assert f"and pytest: {out}" in said, said
    text = out.read_text()
    assert not re.search(r"^\s*(from|import)\s+schedcheck\b", text, re.M), "imports schedcheck"
    return text


def mutant(stem: str) -> Path:
    return next(m for m in MUTANTS if m.stem == stem)


@pytest.mark.parametrize(
    "stem", ["block_freed_twice", "free_hit_left_in_free_list", "cached_by_hash_overwritten"]
)
def test_an_exported_e3_fails_on_the_mutant_and_passes_on_the_engine_it_came_from(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], stem: str
) -> None:
    buggy = repository(checkout(mutant(stem)), tmp_path / "buggy")
    test = tmp_path / f"test_{stem}.py"
    text = export(["engine", str(buggy)], test, capfd)
    assert "def test_the_block_pool_adds_up():" in text and "NEXT = {" in text
    failed = run_test(test, buggy)
    assert failed.returncode == 1 and "AssertionError: after step" in failed.stdout, failed.stdout
    fixed = run_test(test, repository(CORRECT, tmp_path / "fixed"))
    assert fixed.returncode == 0, fixed.stdout


def _fork(tmp_path: Path, name: str, appended: str) -> Path:
    root = repository(CORRECT, tmp_path / name)
    scheduler = root / "nanovllm" / "engine" / "scheduler.py"
    scheduler.write_text(scheduler.read_text() + appended)
    return root


IGNORES_EOS = """

_init = Scheduler.__init__


def _no_eos(self, config):
    _init(self, config)
    self.eos = -1  # read before the engine set it: no sequence stops at eos


Scheduler.__init__ = _no_eos
"""

RAISES_ON_TWO = """

_schedule = Scheduler.schedule


def _one_at_a_time(self):
    assert len(self.running) < 2, "two running"
    return _schedule(self)


Scheduler.schedule = _one_at_a_time
"""


@pytest.mark.parametrize(("check", "body"), [("E7", IGNORES_EOS), ("E6", RAISES_ON_TWO)])
def test_an_exported_e6_or_e7_fails_on_the_fork_and_passes_on_the_correct_engine(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], check: str, body: str
) -> None:
    buggy = _fork(tmp_path, "buggy", body)
    test = tmp_path / f"test_{check}.py"
    capfd.readouterr()
    text = export(["engine", str(buggy)], test, capfd)
    assert f"(schedcheck's {check})" in text
    failed = run_test(test, buggy)
    wanted = "two running" if check == "E6" else "produced"
    assert failed.returncode == 1 and wanted in failed.stdout, failed.stdout
    assert run_test(test, repository(CORRECT, tmp_path / "fixed")).returncode == 0


def test_a_mixed_batch_fork_s_export_fails_on_its_bug_and_passes_without_it(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A fork in vLLM v1's style (schedule() returns one mixed batch; postprocess() takes
    tokens by index, tang-jiapeng's shape) with a block freed twice: its test drives that
    shape and fails; over the correct block manager it passes."""
    shape = next(s for s in SHAPES if s.stem == "mixed_batch")
    fixed = repository(checkout(shape), tmp_path / "fixed")
    buggy = repository(checkout(shape), tmp_path / "buggy")
    manager = buggy / "nanovllm" / "engine" / "block_manager.py"
    manager.rename(manager.with_name("_correct_block_manager.py"))
    manager.write_text(mutant("block_freed_twice").read_text())
    test = tmp_path / "test_mixed.py"
    text = export(["engine", str(buggy), "--runner", "mixed"], test, capfd)
    assert "seqs = list(engine.schedule())" in text
    failed = run_test(test, buggy)
    assert failed.returncode == 1 and "AssertionError: after step" in failed.stdout, failed.stdout
    assert run_test(test, fixed).returncode == 0


def test_an_md_export_is_the_report_to_file_with_its_test_beside_it(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.md"
    root = str(checkout(mutant("block_freed_twice")))
    assert main(["engine", root, "--in-process", "--export", str(out)]) == faults.FAIL
    text = out.read_text()
    assert text.startswith("# The block pool adds up: block ")
    for part in ("## Expected", "## Actual", "E3 at step", "## Scenario", "r1 arrives"):
        assert part in text, part
    assert f"The test `{tmp_path / 'report.py'}` reproduces it" in text
    assert (tmp_path / "report.py").exists() and "Not read yet" in text
    e9 = tmp_path / "e9.md"
    root = str(_fork(tmp_path, "many", IGNORES_MAX_NUM_SEQS))
    args = ["engine", root, "--in-process", "--on", "E9", "--export", str(e9)]
    assert main(args) == faults.FAIL
    assert "No test was exported for this check" in e9.read_text()
    assert not (tmp_path / "e9.py").exists()


IGNORES_MAX_NUM_SEQS = """

_init = Scheduler.__init__


def _unbounded(self, config):
    _init(self, config)
    self.max_num_seqs = 1 << 20  # every waiting sequence that fits is admitted


Scheduler.__init__ = _unbounded
"""


def test_a_check_the_test_cannot_say_is_not_exported_and_the_verdict_stands(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A policy (E9, switched on) is not stated in an exported test."""
    out = tmp_path / "test_e9.py"
    root = str(_fork(tmp_path, "buggy", IGNORES_MAX_NUM_SEQS))
    args = ["engine", root, "--in-process", "--on", "E9", "--export", str(out)]
    assert main(args) == faults.FAIL
    err = capfd.readouterr().err
    assert "not exported: E9 is not exported" in err and not out.exists(), err


@pytest.mark.parametrize(
    ("stem", "check", "said"),
    [
        ("full_prompt_hit", "E1", "is scheduled for positions"),  # NV-03's class
        ("stale_hash_hit", "E2", "attends to position"),  # NV-08's class
        ("pickle_lacks_tokens", "E8", "pickled copy carries"),  # NV-07's class, 2 ranks
    ],
)
def test_an_export_read_off_the_scheduler_s_state_fails_on_the_mutant_and_passes_on_the_engine(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], stem: str, check: str, said: str
) -> None:
    """nano-vllm's test reads its scheduler's state after each schedule() (each scheduled
    sequence's positions, block table and tokens, by its runner's rule): E1 and E2 (the
    KV a model leaves, kept by the test) are stated there."""
    buggy = repository(checkout(mutant(stem)), tmp_path / "buggy")
    test = tmp_path / f"test_{stem}.py"
    text = export(["engine", str(buggy)], test, capfd)
    assert f"(schedcheck's {check})" in text and 'seen("schedule()")' in text
    failed = run_test(test, buggy)
    assert failed.returncode == 1 and said in failed.stdout, failed.stdout
    fixed = run_test(test, repository(CORRECT, tmp_path / "fixed"))
    assert fixed.returncode == 0, fixed.stdout


@pytest.fixture
def toy() -> Iterator[None]:
    from tests.engine_subjects.toy.adapter import ADAPTER

    registry.register("toy", ADAPTER)
    yield
    registry.unregister("toy")


def test_the_toy_engine_s_export_fails_on_its_mutant_and_passes_on_it(
    toy: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """An adapter gets export by rendering its own calls (tests/engine_subjects/toy)."""
    folder = Path(__file__).parent.parent / "engine_subjects" / "toy"
    found = folder / "mutants" / "finish_keeps_refs.py"
    test = tmp_path / "test_toy.py"
    text = export(["engine", "--engine", "toy", str(found)], test, capfd)
    assert "from finish_keeps_refs import Engine" in text
    # the test beside the module it imports: the mutant (over the correct engine), then
    # the correct engine under the mutant's name
    buggy, fixed = tmp_path / "buggy", tmp_path / "fixed"
    buggy.mkdir()
    fixed.mkdir()
    shutil.copy(folder / "engine.py", buggy / "correct_engine.py")
    source = found.read_text().replace("tests.engine_subjects.toy.engine", "correct_engine")
    (buggy / found.name).write_text(source)
    shutil.copy(folder / "engine.py", fixed / found.name)
    failed = run_test(test, buggy)
    assert failed.returncode == 1 and "after step" in failed.stdout, failed.stdout
    assert run_test(test, fixed).returncode == 0


def test_the_exported_pool_problem_finds_what_e3_s_structure_finds() -> None:
    """The test's own copy of E3's structural rules (POOL_PROBLEM) fires where E3 does on a
    pool, and is quiet on one that adds up."""
    good = Pool(
        (Block(1, 1, (1, 2)), Block(0, -1, ()), Block(2, 2, (3, 4))),
        (1,),
        (0, 2),
        {"r1": (0, 2), "r2": (2,)},
        {},
        {},
    )
    assert problem(POOL_PROBLEM, plain_pool(good)) is None
    assert "def pool_problem(pool):" in POOL_PROBLEM
    for bad, said in (
        (good._replace(free=(1, 1)), "in the free list twice"),
        (good._replace(free=(1, 0)), "both free and used"),
        (good._replace(free=()), "neither free, cached nor used"),
        (good._replace(tables={"r1": (0, 2)}), "has ref_count 2, but 1 block table(s)"),
    ):
        found = problem(POOL_PROBLEM, plain_pool(bad))
        assert found is not None and said in found, (said, found)


ASYNC_TRACE = Path(__file__).parent.parent / "engine_subjects" / "vllm" / "async_trace.json"


def _changed(trace: EngineTrace, at: int, **fields: object) -> EngineTrace:
    """The trace with step `at` changed (its fields replaced)."""
    steps = tuple(replace(s, **fields) if s.step == at else s for s in trace.steps)
    return replace(trace, steps=steps)


def _broken(trace: EngineTrace, check: str) -> EngineTrace:
    """The recorded async trace changed so that `check` fires at step 3 (or 2)."""
    two, three = (s for s in trace.steps if s.step in (2, 3))
    if check == "E1":  # r2 computes positions 2..3 with an empty block table
        r1, r2 = two.scheduled
        return _changed(trace, 2, scheduled=(r1, r2._replace(block_table=())))
    if check == "E11":  # r1 counted with three tokens in flight, holding two
        pool = three.after_schedule
        r1, r2 = pool.progress
        wrong = pool._replace(progress=(r1._replace(placeholders=3), r2))
        return _changed(trace, 3, after_schedule=wrong)
    assert check == "E13"  # r2 running, left out of a step with room
    return _changed(trace, 3, scheduled=three.scheduled[:1], copies=three.copies[:1])


@pytest.mark.parametrize("check", ["E1", "E11", "E13"])
def test_each_stated_property_fires_where_its_check_does_and_is_quiet_on_a_correct_trace(
    check: str,
) -> None:
    """properties.py's statement of E1, E11 and E13 (what the exported test asserts, in the
    engine's state as its adapter reads it) on vLLM's recorded async trace: quiet at every
    step, as the check is; on the trace changed to break the check, firing at its step."""
    trace = EngineTrace.from_dict(json.loads(ASYNC_TRACE.read_text()))
    constants = module_constants(trace)
    assert check_engine(trace, [check]) == []
    assert not any(fires(check, trace, s.step, constants) for s in trace.steps)
    broken = _broken(trace, check)
    found = check_engine(broken, [check])
    assert found, f"{check} does not fire on the broken trace"
    assert fires(check, broken, found[0].step, constants)
    assert not any(
        fires(check, broken, s.step, constants) for s in broken.steps if s.step < found[0].step
    )
