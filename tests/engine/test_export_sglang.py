"""SGLang's failures exported as tests in its own idiom (issue 48; engine/sglang/export.py),
run as its maintainers would run them: pytest alone, no schedcheck imported, SGLang's real
Scheduler built on the CPU with the replacements written out in the test.

- An export of a mutant of the release (tests/engine_subjects/sglang/mutants.py, put into
  SGLang's Scheduler by a conftest.py beside the test, as a patch of the release would be)
  fails there and passes on the release it was mutated from, in each event loop.
- The release's own runs, exported as if they had failed (their pool stated after every
  step, E3, and their outputs, E7), pass on the release: retraction, pages of 1 and 2, an
  abort of a running request, in both loops.
- What the test is not written for is refused, saying why.

Marked `sglang`: they need SGLang installed (.ci/run installs it lean and sets
SCHEDCHECK_REQUIRE_SGLANG, so they may not skip there); skipped elsewhere.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedcheck.engine import export
from schedcheck.engine.checks import active
from schedcheck.engine.export import export_test
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.search import search_engine
from schedcheck.engine.sglang.adapter import ADAPTER as SGLANG
from schedcheck.engine.sglang.config import sglang_setup
from schedcheck.engine.sglang.drive import TRAITS
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.verdict import EngineVerdict, verify_engine
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload
from schedcheck.invariants.violation import Violation
from tests.engine.test_sglang import KNOWN, SUBJECTS, build, retracting
from tests.engine_subjects.exported import run_exported
from tests.engine_subjects.sglang.mutants import MUTANTS

pytestmark = pytest.mark.sglang
ROOT = Path(__file__).resolve().parent.parent.parent
REQUIRE = "SCHEDCHECK_REQUIRE_SGLANG"
CHECKS = active(KNOWN, SGLANG.policies_on)  # the release's own bugs off (test_sglang.py)
FINDINGS = ROOT / "findings"

# The mutant, put into SGLang's Scheduler once the test module has imported SGLang (on a
# CPU install the test's stand-ins come first, so SGLang cannot be imported before it)
BUGGY = """import sys

sys.path.insert(0, {root!r})
from tests.engine_subjects.sglang.mutants import {name} as mutate  # noqa: E402


def pytest_runtest_setup(item):
    from sglang.srt.managers.scheduler import Scheduler

    init = Scheduler.__init__
    if getattr(init, "mutated", False):
        return

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        mutate(self)

    __init__.mutated = True
    Scheduler.__init__ = __init__
"""

# Beside a test run on the release: it fails (exit 9) where the test imported schedcheck
ALONE = """import sys


def pytest_sessionfinish(session, exitstatus):
    imported = sorted(m for m in sys.modules if m.split(".")[0] == "schedcheck")
    if imported:
        print("the exported test imported", imported)
        session.exitstatus = 9
"""


@pytest.fixture(scope="module")
def sglang() -> Iterator[LocalEngine]:
    if importlib.util.find_spec("sglang") is None:
        if os.environ.get(REQUIRE):
            pytest.fail(f"SGLang is not installed; {REQUIRE} is set, so these tests must run")
        pytest.skip("SGLang is not installed (.ci/run installs it: .ci/install-sglang)")
    every = sglang_setup(None, argparse.Namespace(loop=None, modes="all"))
    engine = LocalEngine(SGLANG, every)
    yield engine
    engine.stop()


def run_tests(tests: list[Path], folder: Path, conftest: str) -> subprocess.CompletedProcess[str]:
    """The exported tests as SGLang's maintainers would run them: pytest alone, in a folder
    of their own (beside `conftest`)."""
    return run_exported(tests, folder, conftest, timeout=600)


def written(verdict: EngineVerdict, setup_loop: str, sglang: LocalEngine, test: Path) -> str:
    setup = dataclasses.replace(sglang.setup, modes=(setup_loop,))
    rendered = SGLANG.render(setup, verdict.trace)
    assert not isinstance(rendered, str), rendered
    text = export_test(verdict, rendered, "SGLang", "schedcheck engine --engine sglang")
    test.write_text(text)
    return text


@pytest.mark.parametrize(
    ("name", "loop"),
    [("lock_kept", "normal"), ("row_on_free_page", "overlap"), ("eos_ignored", "overlap")],
)
def test_an_export_fails_on_the_mutant_and_passes_on_the_release(
    sglang: LocalEngine, tmp_path: Path, name: str, loop: str
) -> None:
    mutant = next(m for m in MUTANTS if m.name == name)
    build(sglang).patch = mutant.patch
    try:
        features = dataclasses.replace(SGLANG.features, sessions=0)  # SGLANG-06 aside
        found = search_engine(sglang, 500, CHECKS, True, features, (loop,))
    finally:
        build(sglang).patch = None
    assert found.failure is not None, f"{name} was not caught"
    verdict = found.failure[1]
    assert verdict.violations[0].check == mutant.check, verdict.report()
    test = tmp_path / f"test_{name}.py"
    text = written(verdict, loop, sglang, test)
    assert "schedcheck" not in "".join(
        line for line in text.splitlines() if line.startswith(("import", "from"))
    )
    assert f"(schedcheck's {mutant.check})" in text and f"OVERLAP = {loop == 'overlap'}" in text
    failed = run_tests([test], tmp_path / "buggy", BUGGY.format(root=str(ROOT), name=name))
    assert failed.returncode == 1 and "AssertionError" in failed.stdout, failed.stdout[-3000:]
    fixed = run_tests([test], tmp_path / "fixed", ALONE)
    assert fixed.returncode == 0, fixed.stdout[-3000:]


def test_the_release_passes_its_own_runs_exported(
    sglang: LocalEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each run stated as a failure of E3 (its pool checked after every step) and of E7 (its
    outputs, each its output alone; an aborted one a prefix of it), the export's own check
    that the property fires put aside: a correct engine passes every one."""
    monkeypatch.setattr(export, "fires", lambda *args: True)
    workloads = [retracting(loop, page) for loop in ("overlap", "normal") for page in (1, 2)]
    for loop in ("overlap", "normal"):  # r2 aborted while it runs; eos on, but for r1
        requests = (
            EngineRequest("r1", (1, 2, 1, 1), 8, True),
            EngineRequest("r2", (1, 2, 1, 2), 8, abort=4),
            EngineRequest("r3", (1, 2, 1, 3), 8),
        )
        config = EngineConfig(17, 1, 3, 12, mode=loop, conservativeness=0.3)
        workloads.append(EngineWorkload(config, requests, 2))
    tests = []
    for i, workload in enumerate(workloads):
        verdict = verify_engine(sglang, workload, CHECKS)
        assert verdict.ok, verdict.report()
        for check in ("E3", "E7"):
            stated = EngineVerdict(verdict.trace, [Violation(check, 1, "end of run", "stated")])
            test = tmp_path / f"test_run{i}_{check}.py"
            written(stated, workload.config.mode, sglang, test)
            tests.append(test)
    done = run_tests(tests, tmp_path / "release", ALONE)
    assert done.returncode == 0, done.stdout[-3000:]
    assert f"{len(tests)} passed" in done.stdout


def test_the_findings_exported_tests_fail_on_the_release_and_sglang_01_passes_its_fix(
    sglang: LocalEngine, tmp_path: Path
) -> None:
    """findings/SGLANG_01.py to 03.py, as kept: each fails on CI's release at its own
    assertion; SGLANG_01's passes with PR #37260's rule put into the Scheduler."""
    tests = [FINDINGS / f"SGLANG_0{i}.py" for i in (1, 2, 3)]
    done = run_tests(tests, tmp_path / "release", ALONE)
    assert done.returncode == 1 and "3 failed" in done.stdout, done.stdout[-3000:]
    for said in ("was refused by the engine after it ran", "but held 0 when its abort was sent"):
        assert said in done.stdout, done.stdout[-3000:]
    fix = BUGGY.format(root=str(ROOT), name="retracted_exempt")
    fixed = run_tests(tests[:1], tmp_path / "fixed", fix)
    assert fixed.returncode == 0, fixed.stdout[-3000:]


def test_correct_runs_stated_as_e20_and_e21_pass_on_the_release(
    sglang: LocalEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Arrivals refused by a full queue stated as E20; an abort of a request that never ran
    stated as E21: the release keeps both, and so do their exported tests."""
    monkeypatch.setattr(export, "fires", lambda *args: True)
    tests = []
    for name, check in (("refused_arrival", "E20"), ("abort_waiting", "E21")):
        saved = EngineTrace.from_dict(json.loads((SUBJECTS / f"{name}_trace.json").read_text()))
        for loop in ("overlap", "normal"):
            w = saved.workload
            workload = dataclasses.replace(w, config=dataclasses.replace(w.config, mode=loop))
            verdict = verify_engine(sglang, workload, active(frozenset(), SGLANG.policies_on))
            assert verdict.ok, verdict.report()
            stated = EngineVerdict(verdict.trace, [Violation(check, 1, "end of run", "stated")])
            test = tmp_path / f"test_{name}_{loop}.py"
            written(stated, loop, sglang, test)
            tests.append(test)
    done = run_tests(tests, tmp_path / "release", ALONE)
    assert done.returncode == 0 and "4 passed" in done.stdout, done.stdout[-3000:]


def test_what_the_test_is_not_written_for_is_refused(sglang: LocalEngine, tmp_path: Path) -> None:
    requests = (EngineRequest("r1", (1, 2), 2, abort=2, abort_in_step=True),)
    trace = EngineTrace(EngineWorkload(EngineConfig(9, 1, 2, 4, mode="normal"), requests), TRAITS)
    said = SGLANG.render(sglang.setup, trace)
    assert isinstance(said, str) and "during a step" in said
    drafting = dataclasses.replace(
        trace, workload=dataclasses.replace(retracting("normal", 1), drafts=2, drafter="hidden")
    )
    said = SGLANG.render(sglang.setup, drafting)
    assert isinstance(said, str) and "speculative decoding" in said
    plain = dataclasses.replace(trace, workload=retracting("normal", 1))
    (tmp_path / "sglang").mkdir()
    old = dataclasses.replace(sglang.setup, root=str(tmp_path))  # a release of another shape
    said = SGLANG.render(old, plain)
    assert isinstance(said, str) and "Scheduler.ingest_requests" in said
    assert not isinstance(SGLANG.render(sglang.setup, plain), str)
