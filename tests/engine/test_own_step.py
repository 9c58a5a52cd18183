"""A nano-vllm fork driven through its own engine step (issue 39; docs/engines.md, "nano-vllm's
own step"): the engine written here in nano-vllm's API with the rest of an engine over it
(tests/engine_subjects/engine: Config, LLMEngine, a ModelRunner sending calls to its
workers through shared memory, a model that needs a GPU) passes; each mutant of its runner
and of its scheduling code is caught by the check its docstring names; what cannot be
built on a CPU is no verdict; the stand-ins' own rules hold.

Needs torch (a CPU build): skipped without it, except in .ci/run, which installs it and sets
SCHEDCHECK_REQUIRE_TORCH."""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import shutil
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from schedcheck import faults
from schedcheck.cli.main import main
from schedcheck.engine.adapter import SetupError
from schedcheck.engine.isolated import IsolatedEngine
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.nanovllm.adapter import ADAPTER as NANO
from schedcheck.engine.nanovllm.config import read_setup
from schedcheck.engine.nanovllm.model import Forwards, Inputs
from schedcheck.engine.nanovllm.ranks import ProcessState, Ranks
from schedcheck.engine.nanovllm.standins import placeholders
from schedcheck.engine.search import search_engine
from schedcheck.engine.strategies import engine_workloads
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.verdict import Undrivable, verify_engine
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from tests.engine_subjects.catalogue import (
    CORRECT,
    ENGINE,
    MUTANTS,
    RUNNER_MUTANTS,
    checkout,
    expected_checks,
)
from tests.helpers import rotation_day

pytestmark = pytest.mark.torch
REQUIRE = "SCHEDCHECK_REQUIRE_TORCH"

SEARCH = settings(
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def needs_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        if os.environ.get(REQUIRE):
            pytest.fail(f"torch is not installed; {REQUIRE} is set, so these tests must run")
        pytest.skip("torch is not installed (.ci/run installs a CPU build)")


def engine(mutant: Path | None = None, *config: str) -> LocalEngine:
    needs_torch()
    return LocalEngine(NANO, read_setup(str(checkout(mutant, whole=True)), config=list(config)))


def workload(*requests: EngineRequest, blocks: int = 4, budget: int = 4) -> EngineWorkload:
    return EngineWorkload(EngineConfig(blocks, 2, 2, budget), requests)


def request(name: str, *prompt: int, max_tokens: int = 3, arrival: int = 1) -> EngineRequest:
    return EngineRequest(name, prompt, max_tokens, False, arrival)


@pytest.fixture(scope="module")
def correct() -> LocalEngine:
    return engine()


@given(w=engine_workloads())
@SEARCH
def test_the_correct_engine_passes_through_its_own_step(
    correct: LocalEngine, w: EngineWorkload
) -> None:
    verdict = verify_engine(correct, w)
    assert verdict.ok, verdict.report()


def test_its_own_step_is_the_default_and_runs_its_runner_and_a_worker(
    correct: LocalEngine,
) -> None:
    """The setup says its own loop; a step's rows are what its runner computed (a chunk
    of 4 under a budget of 4, then the rest), and a worker rank ran every forward."""
    assert correct.setup.modes == ("own",)
    w = workload(request("r1", 1, 2, 1, 2, 1, 2), request("r2", 1, 2, 3, arrival=2))
    trace = correct.run(w)
    assert trace.failure is None
    first, second = trace.steps[0], trace.steps[1]
    assert [(s.name, s.num_cached, s.num_scheduled) for s in first.scheduled] == [("r1", 0, 4)]
    assert [(s.name, s.num_cached, s.num_scheduled) for s in second.scheduled] == [
        ("r1", 4, 2),
        ("r2", 2, 1),
    ]
    assert trace.outputs == {r.name: w.alone(r) for r in w.requests}
    assert EngineTrace.from_dict(trace.to_dict()) == trace  # saved and replayed as it ran


def test_without_tensor_parallelism_it_passes_too() -> None:
    w = workload(request("r1", 1, 2, 1), request("r2", 1, 2, 2), blocks=3)
    assert verify_engine(engine(None, "tensor_parallel_size=1"), w).ok


# One mutant a day in the default run; all of them with -m costly, which CI runs too.
EVERY = [*RUNNER_MUTANTS, *MUTANTS]
TODAY = {
    RUNNER_MUTANTS[rotation_day() % len(RUNNER_MUTANTS)],
    MUTANTS[rotation_day() % len(MUTANTS)],
}


@pytest.mark.heavy
@pytest.mark.parametrize(
    "mutant",
    [pytest.param(m, marks=() if m in TODAY else pytest.mark.costly) for m in EVERY],
    ids=lambda p: p.stem,
)
def test_each_mutant_is_caught_through_its_own_step(mutant: Path) -> None:
    found = search_engine(engine(mutant), examples=1000)
    assert found.failure is not None, f"{mutant.stem} passed {found.examples} workloads"
    check = found.failure[1].violations[0].check
    assert check in expected_checks(mutant), found.failure[1].report()


@given(w=engine_workloads())
@settings(SEARCH, max_examples=25)
def test_an_engine_stepped_only_by_its_generate_is_driven_through_it(w: EngineWorkload) -> None:
    """No step(), and a generate() that sets what its step reads: each iteration of its
    generate()'s loop is a step, the requests added where it parks (step_once() outside
    generate() would raise, E6)."""
    shape = ENGINE.parent / "engine_shapes" / "generate_loop.py"
    verdict = verify_engine(generate_shaped(shape), w)
    assert verdict.ok, verdict.report()


@given(w=engine_workloads())
@settings(SEARCH, max_examples=10)
def test_a_runner_with_forks_habits_passes(w: EngineWorkload) -> None:
    """dist.group.WORLD, model.cuda().eval(), a GPU package imported inside a call (each
    once an exit 2 of a fork that does nothing wrong)."""
    shape = ENGINE.parent / "engine_shapes" / "runner_habits.py"
    verdict = verify_engine(generate_shaped(shape), w)
    assert verdict.ok, verdict.report()


def test_a_test_module_in_the_package_is_not_imported(tmp_path: Path) -> None:
    """Every module of the package is imported while the placeholders stand (its runner may
    import one inside a call), but not a test or a benchmark, whose import may patch the
    engine: here one that would make it never schedule (E5)."""
    needs_torch()
    root = tmp_path / "fork"
    shutil.copytree(checkout(whole=True), root)
    patch = "from nanovllm.engine.scheduler import Scheduler\n\n"
    patch += "Scheduler.schedule = lambda self: ([], False)\n"
    for name in ("test_scheduler.py", "benchmark.py"):
        (root / "nanovllm" / name).write_text(patch)
    local = LocalEngine(NANO, read_setup(str(root)))
    assert verify_engine(local, workload(request("r1", 1, 2, 1))).ok


def test_a_spawned_process_has_a_pid() -> None:
    """A fork logs its workers' pids (GaoLeiA's LLMEngine)."""
    ranks = Ranks(ProcessState([]), "")
    process = ranks.context().Process(target=print, args=(1,))
    assert process.pid == os.getpid() and process.exitcode is None


_SHAPED: dict[Path, LocalEngine] = {}


def generate_shaped(shape: Path) -> LocalEngine:
    if shape not in _SHAPED:
        _SHAPED[shape] = engine(shape)
    return _SHAPED[shape]


def test_an_output_that_runs_past_eos_is_named_so() -> None:
    """The eos the scheduler copied before the engine set it (HanehirogeTobou's order):
    r1 `[1]` says eos at its second token and goes on; E7 says where it should have ended."""
    mutant = next(m for m in RUNNER_MUTANTS if m.stem == "eos_set_after_scheduler")
    w = EngineWorkload(EngineConfig(2, 2, 1, 4), (EngineRequest("r1", (1,), 3),), vocab=1)
    assert w.alone(w.requests[0]) == (1, 0)
    (v,) = verify_engine(engine(mutant), w).violations
    assert v.check == "E7" and "r1 produced [1, 0, 1]" in v.message
    assert v.message.endswith("it went on past eos (0), its output 2"), v.message


def test_a_decode_one_position_past_its_token_is_e1_naming_the_sequence() -> None:
    """nano-vllm before PR #67: a decode's position is len(seq), not len(seq) - 1."""
    mutant = next(m for m in RUNNER_MUTANTS if m.stem == "decode_one_position_past")
    (v,) = verify_engine(engine(mutant), workload(request("r1", 1, max_tokens=2))).violations
    assert v.check == "E1" and v.step == 2, v.message
    assert "r1 holds these tokens at positions [1], a sequence of 2 tokens" in v.message
    assert "position 2 is past its end" in v.message


def test_a_row_no_sequence_holds_is_e2() -> None:
    """A decode that feeds r1's first token where its second is: no sequence holds it there,
    at that position or any other its row could mean."""
    mutant = next(m for m in RUNNER_MUTANTS if m.stem == "decode_feeds_previous_token")
    w = EngineWorkload(EngineConfig(4, 2, 2, 4), (EngineRequest("r1", (1,), 3),), vocab=2)
    assert w.alone(w.requests[0])[0] == 2  # the decode feeds 1 at position 1, where 2 is
    (v,) = verify_engine(engine(mutant), w).violations
    assert v.check == "E2" and v.step == 2, v.message
    assert "positions [1] on tokens [1] (row 0 of its batch), which no sequence holds" in v.message


def test_a_worker_kept_out_of_the_engine_s_process_state_is_named() -> None:
    """The block size the engine sets in its own process only: the worker's E8 says which
    attribute its process holds otherwise."""
    mutant = next(m for m in RUNNER_MUTANTS if m.stem == "block_size_set_in_rank_zero")
    w = workload(request("r1", 1, 2, 1))
    verdict = verify_engine(engine(mutant), w)
    message = verdict.violations[0].message
    assert verdict.violations[0].check == "E8", verdict.report()
    assert "ZeroDivisionError" in message and "Sequence.block_size = 0 (rank 0: 2)" in message


GPU_SETUP = '''"""Its runner makes a CUDA stream while it is built (a GPU-only step
schedcheck does not know to leave out)."""

# replaces nanovllm/engine/model_runner.py
import torch

from nanovllm.engine._correct_model_runner import ModelRunner as _ModelRunner


class ModelRunner(_ModelRunner):
    def __init__(self, *args):
        self.make_stream()
        super().__init__(*args)

    def make_stream(self):
        self.stream = torch.cuda.Stream()
'''


def test_an_engine_that_cannot_be_built_on_a_cpu_is_no_verdict(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A GPU step in its runner's set-up that schedcheck does not leave out: never a FAIL
    (its code may well be right). Its own step asked for: exit 2, naming the line; by
    default schedcheck's loop drives its scheduler instead, and the report says why."""
    needs_torch()
    source = tmp_path / "gpu_setup.py"
    source.write_text(GPU_SETUP)
    root = checkout(source, whole=True)
    local = LocalEngine(NANO, read_setup(str(root)))
    with pytest.raises(Undrivable, match=r"could not be built on a CPU.*make_stream"):
        verify_engine(local, workload(request("r1", 1)))
    capfd.readouterr()
    assert main(["engine", str(root), "--examples", "5", "--loop", "own"]) == faults.USAGE
    assert "make_stream" in capfd.readouterr().err
    assert main(["engine", str(root), "--examples", "5"]) == faults.PASS
    loop = next(x for x in capfd.readouterr().out.splitlines() if x.startswith("loop:"))
    assert loop.startswith("loop: scheduler (") and "not its own step" in loop, loop
    assert "make_stream" in loop, loop


def shape_root(name: str) -> Path:
    return checkout(ENGINE.parent / "engine_shapes" / f"{name}.py", whole=True)


def report(args: list[str], capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capfd.readouterr()
    code = main(args)
    return code, capfd.readouterr().out


def test_a_runner_that_sizes_its_cache_from_cuda_memory_is_built_with_the_workload_s_pool(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """torch.cuda's memory queries answer (a device of DEVICE_MEMORY bytes, all free); the
    count the runner writes into the Config is put back to the workload's before its
    Scheduler reads it (AppleEgg-169's and pradsgit's, once exit 2)."""
    needs_torch()
    local = LocalEngine(NANO, read_setup(str(shape_root("sizes_cache_in_init"))))
    w = workload(request("r1", 1, 2, 1), request("r2", 1, 2, 2), blocks=3)
    verdict = verify_engine(local, w)
    assert verdict.ok, verdict.report()
    assert {len(s.after_schedule.blocks) for s in verdict.trace.steps} == {3}
    code, out = report(
        ["engine", str(shape_root("sizes_cache_in_init")), "--examples", "30"], capfd
    )
    assert code == faults.PASS and "loop: own (" in out, out


def test_a_runner_that_binds_a_port_while_built_finds_one_in_its_box() -> None:
    """The box's own network namespace has its loopback up, and `localhost` resolves to it:
    the registry derivatives' find_available_port finds a port (was exit 2, all three)."""
    needs_torch()
    box = IsolatedEngine(NANO, read_setup(str(shape_root("binds_port"))))
    try:
        found = search_engine(box, examples=20)
    finally:
        box.stop()
    assert found.failure is None and found.examples == 20, found.failure


def _paged(tmp_path: Path, page: int, mutant: Path | None = None) -> Path:
    """The engine whose Scheduler asserts a block size multiple of `page`, over `mutant`."""
    shape = (ENGINE.parent / "engine_shapes" / "block_size_multiple.py").read_text()
    source = tmp_path / f"block_size_multiple_{page}.py"
    source.write_text(shape.replace("PAGE = 4", f"PAGE = {page}"))
    if mutant is None:
        return checkout(source, whole=True)
    root = tmp_path / "checkout"
    shutil.copytree(checkout(mutant, whole=True), root)
    target = root / "nanovllm" / "engine" / "scheduler.py"
    target.rename(target.with_name("_correct_scheduler.py"))
    target.write_text(source.read_text())
    return root


@pytest.mark.parametrize(("page", "sizes"), [(4, "4"), (8, "8, 16")])
def test_a_block_size_its_own_assert_refuses_is_not_drawn(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], page: int, sizes: str
) -> None:
    """Its Scheduler asserts a multiple of a page: trial builds read the sizes it accepts
    (of 2-4, or else the smallest beyond and its double), the search draws only those, and
    the loop line says which and why."""
    needs_torch()
    root = _paged(tmp_path, page)
    code, out = report(
        ["engine", str(root), "--examples", "60", "--save-failures", str(tmp_path)], capfd
    )
    assert code == faults.PASS, out
    loop = next(x for x in out.splitlines() if x.startswith("loop:"))
    assert f"block sizes: {sizes}, those it accepts (at 2: " in loop and "multiple" in loop, loop


def test_a_known_bug_behind_a_block_size_assert_is_still_found(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The sizes it accepts are run as any other: its bug fails by the same check."""
    needs_torch()
    mutant = next(m for m in MUTANTS if m.stem == "stale_hash_hit")
    root = _paged(tmp_path, 4, mutant)
    code, out = report(["engine", str(root), "--save-failures", str(tmp_path)], capfd)
    assert code == faults.FAIL, out
    assert any(f"\nFAIL {root}" in out and f": {c}\n" in out for c in expected_checks(mutant)), out


def test_a_runner_that_reads_what_the_simulated_model_lacks_falls_back_and_says_so(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Its own step cannot be built (the simulated model has no embedding table): the
    scheduler loop drives it, the loop line names why; with --loop own: exit 2."""
    needs_torch()
    root = str(shape_root("model_reads_embeddings"))
    code, out = report(["engine", root, "--examples", "40"], capfd)
    assert code == faults.PASS, out
    loop = next(x for x in out.splitlines() if x.startswith("loop:"))
    assert "not its own step, which cannot be built here" in loop and "embed_tokens" in loop
    assert main(["engine", root, "--examples", "5", "--loop", "own"]) == faults.USAGE


def test_its_own_loop_needs_its_engine_and_torch(tmp_path: Path) -> None:
    """A checkout with only the scheduling code runs schedcheck's loop, and says why;
    asking for its own step there is a usage error naming what is missing."""
    assert read_setup(str(CORRECT)).modes == ("scheduler",)
    with pytest.raises(SetupError, match=r"no nanovllm/engine/llm_engine\.py"):
        read_setup(str(CORRECT), loop="own")
    with pytest.raises(SetupError, match="nano-vllm's loops are own, scheduler"):
        read_setup(str(CORRECT), loop="overlap")
    needs_torch()
    both = read_setup(str(checkout(whole=True)), modes="all")
    assert both.modes == ("own", "scheduler")
    assert read_setup(str(checkout(whole=True)), loop="scheduler").modes == ("scheduler",)


def test_isolated_it_passes_in_its_box() -> None:
    """torch and what the engine imports are loaded before the box; a worker rank runs in
    it as in the checking process."""
    needs_torch()
    box = IsolatedEngine(NANO, read_setup(str(checkout(whole=True))))
    try:
        found = search_engine(box, examples=40)
    finally:
        box.stop()
    assert found.failure is None and found.examples == 40


def test_a_fresh_process_state_restarts_counters_and_scales_the_block_size() -> None:
    """What a spawned worker (and each workload's engine) starts from: the import-time
    values, a counter from its start, a block size of the fork's default read as the
    workload's."""
    module = types.ModuleType("fork_sequence")

    class Sequence:
        block_size = 256
        counter = itertools.count()
        name = "seq"

    Sequence.__module__ = module.__name__
    module.Sequence = Sequence  # type: ignore[attr-defined]
    module.LIMIT = 256  # type: ignore[attr-defined]
    state = ProcessState([module])
    next(Sequence.counter)
    Sequence.block_size = 4
    state.apply(state.scaled(256, 2))
    assert Sequence.block_size == 2 and next(Sequence.counter) == 0
    assert module.LIMIT == 256  # type: ignore[attr-defined]  # not named a block size
    state.apply(state.pristine)
    assert Sequence.block_size == 256
    assert state.differences(state.pristine, state.scaled(256, 2)) == [
        "Sequence.block_size = 2 (rank 0: 256)"
    ]


def test_a_worker_s_inputs_are_told_from_rank_zero_s() -> None:
    rank0 = Inputs(False, (5,), (3,), (7,), ((3, 1),), (), (), (4,))
    same = Inputs(*rank0)
    other = rank0._replace(slot_mapping=(9,))
    assert rank0.differs(same) is None
    assert rank0.differs(other) == "slot_mapping [9], rank 0's [7]"


def test_an_engine_neither_whole_nor_alone_loads_is_no_verdict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Its runner imports a compiled extension not installed here, and its scheduling code
    a helper of its config.py that schedcheck's loop does not give (linye0/nano-vllm-ly):
    exit 2 saying why, in its own step and in schedcheck's loop, never E6."""
    needs_torch()
    root = tmp_path / "fork"
    shutil.copytree(checkout(whole=True), root)
    package = root / "nanovllm"
    runner = package / "engine" / "model_runner.py"
    runner.write_text("import attention_ext_built_elsewhere\n" + runner.read_text())
    config = package / "config.py"
    config.write_text(config.read_text() + "\n\ndef chunked():\n    return False\n")
    sequence = package / "engine" / "sequence.py"
    sequence.write_text(sequence.read_text() + "\nfrom nanovllm.config import chunked\n")
    # in-process, --loop scheduler never imports it whole: test_engine_setup has that case
    for loop, where in [("own", []), ("own", ["--in-process"]), ("scheduler", [])]:
        code = main(["engine", str(package), "--loop", loop, "--examples", "5", *where])
        err = capsys.readouterr().err
        assert code == faults.USAGE, (loop, where, err)
        assert "No module named 'attention_ext_built_elsewhere'" in err
        if loop == "scheduler":
            assert "alone: its scheduling code imports chunked from its config.py" in err


def test_a_row_reads_what_a_later_row_of_the_same_forward_writes() -> None:
    """Attention runs after the whole batch's KV is stored: r3's prefill (a hit on block 0,
    which r1's decode fills in this very forward, a later row) reads position 1 of [1 1]
    there (lingebeng/nano-vllm-plus's mixed batches; E2 once, read row by row)."""

    class Seq:
        def __init__(self, tokens: list[int], table: list[int]) -> None:
            self.token_ids, self.block_table = tokens, table

    r1, r3 = Seq([1, 1], [0]), Seq([1, 1, 1], [0, 1])
    w = workload(request("r1", 1), request("r3", 1, 1, 1))
    forwards = Forwards(w, {id(r1): "r1", id(r3): "r3"})
    forwards.known = lambda: [r1, r3]
    forwards.kv[0] = (0, (1,), "r1", 1)  # r1's prefill, a step before
    # row 0: r3 computes position 2 over 3 keys; row 1: r1's decode writes position 1
    mixed = Inputs(True, (1, 1), (2, 1), (2, 1), ((0, 1), (0, -1)), (0, 1, 2), (0, 3, 5), ())
    assert forwards.forward(mixed) == [((1, 1, 1), (2,)), ((1, 1), (1,))]
    assert forwards.problem is None
    assert forwards.kv[1][:2] == (1, (1, 1))  # written for r1, read by r3


def test_the_command_says_which_loop_and_what_is_not_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    needs_torch()
    root = tmp_path / "fork"
    shutil.copytree(checkout(whole=True), root)
    assert main(["engine", str(root), "--examples", "10", "--in-process"]) == faults.PASS
    out = capsys.readouterr().out
    assert "loop: own (its LLMEngine.step() and ModelRunner" in out
    assert "not run: the model's forward, its sampler" in out
    assert "warmup_model, allocate_kv_cache" in out


def test_loop_is_an_option_nano_vllm_takes() -> None:
    args = argparse.Namespace(package=None, config=[], runner=None, loop="scheduler", modes=None)
    assert NANO.setup(str(CORRECT), args).modes == ("scheduler",)


def test_a_fault_of_the_simulated_model_is_ours_not_the_engine_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An exception in schedcheck's own model code, raised inside the engine's step, is
    schedcheck's fault (it propagates: exit 3), never the engine's E6."""
    local = engine()

    def broken(self: Forwards, got: Inputs) -> list[object]:
        raise RuntimeError("a bug of the simulated model")

    monkeypatch.setattr(Forwards, "forward", broken)
    with pytest.raises(RuntimeError, match="a bug of the simulated model"):
        verify_engine(local, workload(request("r1", 1, 2)))


REFUSING = '''"""An engine whose add_request() refuses requests that need the whole pool (its own
admission rule)."""

# replaces nanovllm/engine/llm_engine.py
from nanovllm.engine._correct_llm_engine import LLMEngine as _LLMEngine


class LLMEngine(_LLMEngine):
    def add_request(self, prompt, sampling_params):
        if len(prompt) + sampling_params.max_tokens > 2:
            raise ValueError("request needs more KV blocks than are available")
        super().add_request(prompt, sampling_params)
'''


def test_a_request_its_admission_refuses_is_no_verdict(tmp_path: Path) -> None:
    source = tmp_path / "refusing.py"
    source.write_text(REFUSING)
    local = engine(source)
    with pytest.raises(Undrivable, match=r"its add_request\(\) refuses r1 .* needs more KV"):
        verify_engine(local, workload(request("r1", 1, 2)))


CUDA_IN_STEP = '''"""Its step asks torch.cuda for the current stream (refused on a CPU)."""

# replaces nanovllm/engine/model_runner.py
import torch

from nanovllm.engine._correct_model_runner import ModelRunner as _ModelRunner


class ModelRunner(_ModelRunner):
    def run(self, seqs, is_prefill):
        self.stream = torch.cuda.current_stream()
        return super().run(seqs, is_prefill)
'''


def test_a_cuda_call_in_its_step_is_no_verdict(tmp_path: Path) -> None:
    """torch.cuda refusing on a CPU is schedcheck's stand-in gap, never the engine's E6
    (two forks of the scan: torch.cuda.current_stream, torch.cuda.nvtx)."""
    source = tmp_path / "cuda_in_step.py"
    source.write_text(CUDA_IN_STEP)
    with pytest.raises(Undrivable, match=r"it calls CUDA through torch\.cuda"):
        verify_engine(engine(source), workload(request("r1", 1, 2)))


@given(w=engine_workloads())
@settings(SEARCH, max_examples=10)
def test_a_progress_bar_made_whatever_use_tqdm_says_is_no_failure(w: EngineWorkload) -> None:
    """jqzhang03's generate() makes its bar unconditionally and sets what its step reads:
    driven through generate(), tqdm installed or stood in (a false E6 at step 1 on 88f0ace
    where it was not: the stand-in's call ended generate() before its loop)."""
    shape = ENGINE.parent / "engine_shapes" / "progress_bar.py"
    verdict = verify_engine(generate_shaped(shape), w)
    assert verdict.ok, verdict.report()


def test_the_stood_in_progress_bar_is_silent() -> None:
    """Where tqdm is not installed its stand-in wraps what it is given and does nothing."""
    with placeholders(frozenset({"tqdm"})):
        from tqdm.auto import tqdm, trange  # type: ignore[import-untyped]

    bar = tqdm([3, 1, 2], desc="x", total=3)
    assert list(bar) == [3, 1, 2] and len(bar) == 3 and list(trange(2)) == [0, 1]
    with tqdm(total=5) as bar:
        assert bar.update(1) is None and bar.set_postfix({"a": 1}) is None and bar.n == 0


def test_a_step_reading_what_an_undriven_generate_sets_is_no_verdict() -> None:
    """generate() calls a stood-in package before its loop, so it never parks; its step()
    alone reads what generate() would have set: exit 2 (ours to say), never E6."""
    shape = ENGINE.parent / "engine_shapes" / "generate_needs_the_hub.py"
    with pytest.raises(Undrivable, match=r"LLMEngine\.per_run, which only generate sets"):
        verify_engine(engine(shape), workload(request("r1", 1, 2)))
