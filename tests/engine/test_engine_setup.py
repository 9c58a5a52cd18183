"""What `schedcheck engine` reads of an engine before it runs, and what it makes of real
engines' shapes (issue 24): the engine's own Config, the runner of its generation, another
package name, a wheel, schedule()'s answer, a Scheduler without postprocess(), the policy
checks and what nano-vllm's runner asks of a pickled copy."""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import re
import shutil
import types
import zipfile
from pathlib import Path

import pytest

from schedcheck import faults
from schedcheck.cli.main import main
from schedcheck.engine.adapter import SetupError
from schedcheck.engine.blocks import pool_problem
from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.nanovllm.adapter import ADAPTER as NANO
from schedcheck.engine.nanovllm.config import detect_runner, loops_line, read_config, read_setup
from schedcheck.engine.nanovllm.copyout import status
from schedcheck.engine.search import search_engine
from schedcheck.engine.strategies import CHUNKED, EOS_FINISH, FREE_BLOCK_HIT, IGNORED_EOS, labels
from schedcheck.engine.trace import Block, Pool
from schedcheck.engine.verdict import Undrivable, verify_engine
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from tests.engine_subjects.catalogue import CORRECT, SHAPES, checkout, runner_of

R1, R2 = EngineRequest("r1", (1, 2, 1), 2), EngineRequest("r2", (2, 1), 2, arrival=2)
ONE = EngineWorkload(EngineConfig(4, 2, 1, 4), (R1, R2))


def fork(tmp_path: Path, package: str = "nanovllm", **appended: str) -> Path:
    """The correct engine copied, its package renamed, text appended to its modules."""
    root = tmp_path / "fork"
    shutil.copytree(CORRECT / "nanovllm", root / package)
    for path in (root / package).rglob("*.py"):
        path.write_text(path.read_text().replace("nanovllm.", f"{package}."))
    for module, text in appended.items():
        target = root / package / f"{module.replace('.', '/')}.py"
        target.write_text((target.read_text() if target.exists() else "") + text)
    return root


def test_the_config_is_read_off_config_py_fields_defaults_and_fields_without_one() -> None:
    source = (
        "from dataclasses import dataclass, field\n\n@dataclass\nclass Config:\n"
        "    model: str\n    max_num_seqs: int = 512\n    chunk_size: int = field(default=8)\n"
        "    stops: list = field(default_factory=list)\n    hf_config: object | None = None\n"
        "    dtype = torch.float16\n"
    )
    values, unset = read_config(source)
    assert values == {"max_num_seqs": 512, "chunk_size": 8, "stops": [], "hf_config": None}
    assert unset == ("model", "dtype")


def test_a_forks_own_config_field_is_read_and_can_be_set(tmp_path: Path) -> None:
    body = (
        "\n\n_init = Scheduler.__init__\n\n\ndef _own(self, config):\n"
        "    assert config.enable_chunked_prefill in (False, True)\n"
        "    assert config.chunk_size == 4\n    _init(self, config)\n\n\n"
        "Scheduler.__init__ = _own\n"
    )
    root = fork(tmp_path, **{"engine.scheduler": body})
    (root / "nanovllm" / "config.py").write_text(
        "class Config:\n    model: str\n    enable_chunked_prefill: bool = False\n"
        "    chunk_size: int = 4\n"
    )
    assert verify_engine(LocalEngine(NANO, read_setup(str(root))), ONE).ok
    on = read_setup(str(root), config=["enable_chunked_prefill=true"])
    assert on.config["enable_chunked_prefill"] is True
    assert verify_engine(LocalEngine(NANO, on), ONE).ok
    with pytest.raises(SetupError, match="draws max_num_seqs"):
        read_setup(str(root), config=["max_num_seqs=3"])


CONFIG = (
    "from dataclasses import dataclass\n\n@dataclass\nclass Config:\n    model: str\n"
    "    enable_mixed_batching: bool = True\n    chunk: int = 4\n    ratio: float = 0.5\n"
    "    name: str = 'x'\n    limit: int | None = None\n    flag: bool = field(default=False)\n"
)


@pytest.mark.parametrize(
    ("given", "value"),
    [
        ("enable_mixed_batching=false", False),
        ("enable_mixed_batching=FALSE", False),
        ("enable_mixed_batching=0", False),
        ("enable_mixed_batching=True", True),
        ("enable_mixed_batching=1", True),
        ("chunk=16", 16),
        ("ratio=2", 2.0),
        ("name=false", "false"),  # a str field keeps the text
        ("name='y'", "y"),
        ("limit=8", 8),  # None by default: the annotation's int
        ("flag=true", True),
    ],
)
def test_config_values_take_the_type_of_the_field(
    tmp_path: Path, given: str, value: object
) -> None:
    """Issue 39: `--config enable_mixed_batching=false` was the string "false", which a fork
    reads as true. Each value now takes its field's type."""
    root = fork(tmp_path)
    (root / "nanovllm" / "config.py").write_text(CONFIG)
    setup = read_setup(str(root), config=[given])
    key = given.partition("=")[0]
    assert setup.config[key] == value and type(setup.config[key]) is type(value)
    assert f"set by --config: {key}={value!r}" in setup.config_from


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (
            "enable_mixed_batching=yes",
            "enable_mixed_batching is a bool field: expected true, false, 1 or 0",
        ),
        ("chunk=2.5", "chunk is an int field: expected an int"),
        ("ratio=half", "ratio is a float field: expected a float"),
    ],
)
def test_a_config_value_that_does_not_fit_its_field_is_a_usage_error(
    tmp_path: Path, given: str, said: str, capfd: pytest.CaptureFixture[str]
) -> None:
    root = fork(tmp_path)
    (root / "nanovllm" / "config.py").write_text(CONFIG)
    with pytest.raises(SetupError, match=re.escape(said)):
        read_setup(str(root), config=[given])
    assert main(["engine", str(root), "--config", given]) == faults.USAGE
    assert f"--config {given}: {said}" in capfd.readouterr().err


def test_a_config_field_without_a_value_is_a_usage_error_naming_it(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    body = "\n\n_init = Scheduler.__init__\nScheduler.__init__ = lambda s, c: (c.model, _init(s, c))[1]\n"  # noqa: E501
    root = fork(tmp_path, **{"engine.scheduler": body})
    (root / "nanovllm" / "config.py").write_text("class Config:\n    model: str\n")
    assert main(["engine", str(root), "--examples", "5"]) == faults.USAGE
    assert "Config.model has no value" in capfd.readouterr().err
    assert main(["engine", str(root), "--examples", "5", "--config", "model=x"]) == faults.PASS


CLAMPED = "start = min(seq.num_cached_tokens, len(seq) - 1)"


@pytest.mark.parametrize(
    ("function", "body", "runner"),
    [
        (
            "prepare_prefill",
            "start = seq.num_cached_tokens\n        n = seq.num_scheduled_tokens",
            "chunked",
        ),
        ("prepare_prefill", CLAMPED + "\n        n = seq.num_scheduled_tokens", "chunked-clamped"),
        ("prepare_prefill", "positions.extend(range(seq.num_cached_tokens, len(seq)))", "whole"),
        ("prepare_model_input", "end = seq.num_cached_tokens + seq.num_new_tokens", "mixed"),
        (
            "prepare_prefill",
            "start, end = seq.scheduled_prefill_start, seq.scheduled_prefill_end",
            "window",
        ),
    ],
)
def test_the_runner_is_read_off_model_runner_py(
    tmp_path: Path, function: str, body: str, runner: str
) -> None:
    root = fork(tmp_path)
    text = f"class ModelRunner:\n    def {function}(self, seqs):\n        {body}\n"
    (root / "nanovllm" / "engine" / "model_runner.py").write_text(text)
    assert detect_runner(root, "nanovllm")[0] == runner
    assert read_setup(str(root), runner="whole").runner == "whole"  # the user corrects it


def test_a_package_of_another_name_and_a_wheel_are_driven(tmp_path: Path) -> None:
    root = fork(tmp_path, package="myengine")
    setup = read_setup(str(root))
    assert setup.package == "myengine"
    assert verify_engine(LocalEngine(NANO, setup), ONE).ok
    wheel = tmp_path / "myengine-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path in (root / "myengine").rglob("*.py"):
            z.write(path, str(path.relative_to(root)))
    assert read_setup(str(wheel)).package == "myengine"
    assert main(["engine", str(wheel), "--examples", "20"]) == faults.PASS


def test_schedule_may_answer_with_more_than_nano_vllms_pair(tmp_path: Path) -> None:
    body = (
        "\n\n_schedule = Scheduler.schedule\n"
        "Scheduler.schedule = lambda self: (*_schedule(self), {'swap': {}})\n"
    )
    assert verify_engine(
        LocalEngine(NANO, read_setup(str(fork(tmp_path, **{"engine.scheduler": body})))), ONE
    ).ok


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            "\n\n_s = Scheduler.schedule\nScheduler.schedule = lambda self: _s(self)[0]\n",
            "a mixed batch, which runner 'chunked' does not compute (--runner mixed does)",
        ),
        (
            "\n\n_s = Scheduler.schedule\nScheduler.schedule = lambda self: (_s(self)[0], 1)\n",
            "schedule() returned a tuple of 2 (list, int), not (sequences, is_prefill)",
        ),
        ("\n\ndel Scheduler.postprocess\n", "Scheduler.postprocess() (or finish())"),
    ],
    ids=["a-bare-list", "no-phase", "no-postprocess"],
)
def test_what_cannot_be_driven_is_a_usage_error_saying_what(
    tmp_path: Path, body: str, said: str, capfd: pytest.CaptureFixture[str]
) -> None:
    root = fork(tmp_path, **{"engine.scheduler": body})
    with pytest.raises(Undrivable, match=said.replace("(", r"\(").replace(")", r"\)")):
        verify_engine(LocalEngine(NANO, read_setup(str(root))), ONE)
    assert main(["engine", str(root)]) == faults.USAGE
    assert said in capfd.readouterr().err


def test_e9_is_a_policy_off_by_default_and_safety_checks_cannot_be_switched() -> None:
    trace = LocalEngine(NANO, read_setup(str(CORRECT))).run(ONE)  # r2 arrives while r1 runs
    assert check_engine(trace) == []
    assert [v.check for v in check_engine(trace, active(on=frozenset({"E9"})))] == ["E9"]
    assert "E4" not in active(off=frozenset({"E4"}))
    with pytest.raises(ValueError, match="E2 is a safety check"):
        active(off=frozenset({"E2"}))
    with pytest.raises(ValueError, match="no engine check 'E42'"):
        active(on=frozenset({"E42"}))


def test_e8_asks_of_a_decodes_copy_its_last_token_not_its_tokens() -> None:
    trace = LocalEngine(NANO, read_setup(str(CORRECT))).run(ONE)
    i, step = next((i, s) for i, s in enumerate(trace.steps) if not s.is_prefill)
    seq, copy = step.scheduled[0], step.copies[0]
    assert copy.token_ids == () and copy.last_token == seq.token_ids[-1]  # nano-vllm's rule
    wrong = dataclasses.replace(step, copies=(copy._replace(last_token=copy.last_token + 1),))
    bad = dataclasses.replace(trace, steps=(*trace.steps[:i], wrong, *trace.steps[i + 1 :]))
    assert [v.check for v in check_engine(bad)] == ["E8"]


def test_a_block_of_one_token_is_not_valid_input() -> None:
    w = EngineWorkload(EngineConfig(4, 1, 1, 4), (EngineRequest("r1", (1,), 1),))
    assert "below 2" in w.problems()[0]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda p: p.stem)
def test_a_correct_engine_of_a_forks_shape_passes(shape: Path) -> None:
    setup = read_setup(str(checkout(shape)), runner=runner_of(shape))
    found = search_engine(LocalEngine(NANO, setup), examples=300)
    assert found.failure is None, found.failure[1].report() if found.failure else ""
    # each shape reaches what makes it a shape: mixed batches chunk, a cached pool is hit
    assert {CHUNKED, FREE_BLOCK_HIT} <= set(found.reached), found.reached


def _pool(
    free: tuple[int, ...],
    used: tuple[int, ...],
    cached: tuple[int, ...],
    hashes: tuple[int, ...] = (7, 8, 9),
) -> Pool:
    blocks = tuple(Block(1 if b in used else 0, h, (b, b)) for b, h in enumerate(hashes))
    tables = {"r1": used}
    return Pool(blocks, free, used, tables, {"r1": (1, 2) * 3}, {"r1": "RUNNING"}, cached)


def test_e3_counts_freed_but_cached_blocks_and_fires_on_one_in_no_state() -> None:
    assert pool_problem(_pool((0,), (1,), (2,)), 2) is None  # free, used, cached: adds up
    lost = pool_problem(_pool((0,), (1,), ()), 2)  # block 2 overwritten in a hash map
    assert lost is not None and "block 2 is neither free nor used" in lost[0]
    twice = pool_problem(_pool((0, 2), (1,), (2,)), 2)
    assert twice is not None and "block 2 is both free and cached" in twice[0]
    unhashed = pool_problem(_pool((0,), (1,), (2,), hashes=(7, 8, -1)), 2)
    assert unhashed is not None and "block 2 is kept as cached, but holds no hash" in unhashed[0]
    held = pool_problem(_pool((0,), (1,), (1, 2)), 2)
    assert held is not None and "block 1 is both cached and used" in held[0]


def test_an_engine_whose_eos_is_a_set_of_stop_ids_is_driven(tmp_path: Path) -> None:
    root = fork(tmp_path)
    scheduler = root / "nanovllm" / "engine" / "scheduler.py"
    text = scheduler.read_text()
    assert "token_id == self.eos" in text
    scheduler.write_text(text.replace("token_id == self.eos", "token_id in self.eos"))
    found = search_engine(LocalEngine(NANO, read_setup(str(root))), examples=100)
    assert found.failure is None and found.reached[EOS_FINISH] > 0


def test_a_runner_that_changes_the_sequences_it_runs_cannot_be_driven(tmp_path: Path) -> None:
    root = fork(tmp_path)
    runner = root / "nanovllm" / "engine" / "model_runner.py"
    runner.write_text(
        "class ModelRunner:\n    def warmup_model(self, seq):\n"
        "        seq.num_scheduled_tokens = 4\n"
    )
    assert read_setup(str(root)).runner == "chunked"  # warmup is outside a step
    run = "    def run(self, seqs):\n        for seq in seqs:\n"
    run += "            seq.num_computed_tokens += 1\n"
    runner.write_text(runner.read_text() + run)
    with pytest.raises(SetupError, match=r"\(num_computed_tokens in run\(\), in nanovllm/"):
        read_setup(str(root))


def test_a_checkout_without_an_engine_at_its_top_names_those_below(tmp_path: Path) -> None:
    root = fork(tmp_path)
    (tmp_path / "repo" / "src").mkdir(parents=True)
    shutil.move(root / "nanovllm", tmp_path / "repo" / "src" / "nanovllm")
    with pytest.raises(SetupError, match=r"below it: src/nanovllm \(give the folder"):
        read_setup(str(tmp_path / "repo"))
    assert read_setup(str(tmp_path / "repo" / "src")).package == "nanovllm"


def test_engine_usage_errors_are_exit_2_naming_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--engine vllm PATH` where PATH holds no vLLM checkout, an option its adapter does not
    take, an engine nobody registered, a runner nano-vllm has no rules for: a usage error
    (exit 2) saying so, before anything of the engine is imported."""
    assert main(["engine", "--engine", "vllm", str(tmp_path)]) == faults.USAGE
    assert "holds no vLLM checkout (no vllm/v1/core/sched/scheduler.py)" in capsys.readouterr().err
    assert main(["engine", "--engine", "vllm", "--prefill", "whole"]) == faults.USAGE
    err = capsys.readouterr().err
    assert "--prefill: not an option of vLLM's adapter (--engine vllm)" in err
    assert main(["engine", str(CORRECT), "--async", "on", "--modes", "all"]) == faults.USAGE
    err = capsys.readouterr().err
    assert "--async: not an option of nano-vllm's adapter (--engine nanovllm)" in err
    assert main(["engine", str(CORRECT), "--loop", "overlap"]) == faults.USAGE
    assert "--loop overlap: nano-vllm's loops are own, scheduler" in capsys.readouterr().err
    assert main(["engine", "--engine", "nosuch", str(tmp_path)]) == faults.USAGE
    assert "--engine nosuch: no such engine (the engines: nanovllm, vllm" in capsys.readouterr().err
    assert main(["engine", str(CORRECT), "--runner", "vllm"]) == faults.USAGE
    assert "--runner vllm: not one of chunked" in capsys.readouterr().err


def test_the_old_vllm_spelling_still_works_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["engine", "--vllm", str(tmp_path)]) == faults.USAGE
    err = capsys.readouterr().err
    assert "--vllm is deprecated; use --engine vllm" in err
    assert "holds no vLLM checkout" in err  # it went on as --engine vllm
    assert main(["engine", "--vllm", "--engine", "nanovllm", str(tmp_path)]) == faults.USAGE
    assert "--vllm and --engine nanovllm disagree" in capsys.readouterr().err


def test_without_torch_a_whole_checkout_runs_schedcheck_s_loop_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its own step needs torch: where it is missing, the default is schedcheck's loop, the
    report's loop line says why, and asking for the own step is a usage error."""
    whole = str(checkout(whole=True))
    _no_torch(monkeypatch)
    setup = read_setup(whole)
    assert setup.modes == ("scheduler",)
    assert "not its own step: torch is not installed here" in loops_line(setup)
    with pytest.raises(SetupError, match="own step cannot be driven: torch is not installed"):
        read_setup(whole, loop="own")


def _no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a, **k: None if name == "torch" else real(name, *a, **k),
    )


BARE_LIST = "\n\n_s = Scheduler.schedule\nScheduler.schedule = lambda self: _s(self)[0]\n"


@pytest.mark.parametrize("whole", [True, False], ids=["whole-engine", "scheduling-code-only"])
def test_without_torch_what_its_loop_cannot_drive_says_whether_its_own_step_could(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    whole: bool,
) -> None:
    """A fork of another shape than schedcheck's loop drives: exit 2, and where its whole
    engine is there, the message says its own step would drive it with torch (issue 53)."""
    root = tmp_path / "checkout"
    shutil.copytree(checkout(whole=whole), root)
    scheduler = root / "nanovllm" / "engine" / "scheduler.py"
    scheduler.write_text(scheduler.read_text() + BARE_LIST)
    _no_torch(monkeypatch)
    capfd.readouterr()
    assert main(["engine", str(root), "--in-process"]) == faults.USAGE
    err = capfd.readouterr().err
    assert "a mixed batch" in err, err
    assert ("its own step (--loop own)" in err and "needs torch" in err) == whole, err


PARAMS_WITHOUT_IGNORE_EOS = """from dataclasses import dataclass


@dataclass
class SamplingParams:
    temperature: float = 1.0
    max_tokens: int = 64
    ignore_eos = False  # not a field: every request stops at eos
"""


def test_a_sampling_params_without_ignore_eos_gets_no_request_that_ignores_eos(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """pradsgit's SamplingParams takes temperature and max_tokens only: its setup lacks the
    feature, no workload draws it, the header says so, and a saved workload that has it is
    not valid input (was E6 on every workload drawing it: schedcheck's own keyword)."""
    root = fork(tmp_path)
    (root / "nanovllm" / "sampling_params.py").write_text(PARAMS_WITHOUT_IGNORE_EOS)
    setup = read_setup(str(root))
    assert setup.lacks == ("ignore_eos",)
    assert read_setup(str(CORRECT)).lacks == ()
    features = setup.features(NANO.features)
    assert not features.ignore_eos and IGNORED_EOS not in labels(features)
    found = search_engine(LocalEngine(NANO, setup), examples=60, features=features)
    assert found.failure is None and found.examples == 60, found.failure
    capfd.readouterr()
    assert main(["engine", str(root), "--in-process", "--examples", "20"]) == faults.PASS
    out = capfd.readouterr().out
    assert "SamplingParams takes no ignore_eos: no request ignores eos" in out, out
    assert IGNORED_EOS not in out, out
    saved = tmp_path / "ignores.json"
    ignoring = dataclasses.replace(R1, ignore_eos=True)
    saved.write_text(EngineWorkload(EngineConfig(4, 2, 1, 4), (ignoring,)).to_json())
    assert main(["engine", str(root), "--in-process", "--replay", str(saved)]) == faults.USAGE
    assert "a request that ignores eos, which this engine's adapter" in capfd.readouterr().err


CONFIG_WITH_A_HELPER = """from dataclasses import dataclass


@dataclass
class Config:
    model: str = "."
    max_num_batched_tokens: int = 16384
    max_num_seqs: int = 512
    eos: int = -1
    kvcache_block_size: int = 256
    num_kvcache_blocks: int = -1


def chunked() -> bool:
    return False
"""


@pytest.mark.parametrize("where", [[], ["--in-process"]], ids=["isolated", "in-process"])
def test_a_config_helper_schedcheck_s_loop_cannot_give_is_a_usage_error(
    tmp_path: Path, where: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Its scheduling code imports a function of its config.py, which schedcheck's loop
    replaces by a Config alone (linye0/nano-vllm-ly's `is_chunked_prefill`): no verdict
    (exit 2, saying why), never E6 on the engine."""
    sequence = "\nfrom nanovllm.config import chunked\n"
    root = fork(tmp_path, config=CONFIG_WITH_A_HELPER, **{"engine.sequence": sequence})
    code = main(["engine", str(root / "nanovllm"), "--loop", "scheduler", *where])
    err = capsys.readouterr().err
    assert code == faults.USAGE, err
    assert "its scheduling code imports chunked from its config.py" in err


def test_a_status_is_named_by_its_own_class() -> None:
    """Status names are cached (an Enum's .name is slow twice a step), by class: two forks'
    IntEnum members of one value are equal, and still named each by its own."""

    class Mine(enum.IntEnum):
        WAITING = 1

    class Theirs(enum.IntEnum):
        RUNNING = 1

    assert Mine.WAITING == Theirs.RUNNING
    names = [status(types.SimpleNamespace(status=s)) for s in (Mine.WAITING, Theirs.RUNNING, 1)]
    assert names == ["WAITING", "RUNNING", "1"]
