"""vLLM's failures exported as tests in its own idiom (issue 48; engine/vllm/export.py), run
as its maintainers run them: pytest alone, no schedcheck imported.

- An export of a mutant of the release (tests/engine_subjects/vllm/mutants.py, put into
  vLLM's Scheduler by a conftest.py beside the test, as a patch of the release would be)
  fails there and passes on the release it was mutated from.
- The findings ledger's vLLM tests (findings/VLLM_*.py, docs/findings.md) fail on the
  installed release where the ledger says the bug is in it and pass where it was fixed:
  CI's pinned release runs them, so a regression shows as a failing test named after
  its finding.

Marked `vllm`: they need vLLM installed (.ci/run installs it and sets
SCHEDCHECK_REQUIRE_VLLM, so they may not skip there).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import importlib.util
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedcheck.engine.adapter import Features
from schedcheck.engine.checks import active
from schedcheck.engine.export import export_test
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.search import search_engine
from schedcheck.engine.verdict import verify_engine
from schedcheck.engine.vllm.adapter import ADAPTER as VLLM
from schedcheck.engine.vllm.config import vllm_setup
from tests.engine.vllm_engine import local_vllm, unkeyed
from tests.engine_subjects.exported import run_exported
from tests.engine_subjects.vllm.mutants import MUTANTS

pytestmark = pytest.mark.vllm
ROOT = Path(__file__).resolve().parent.parent.parent
FINDINGS = ROOT / "findings"
REQUIRE = "SCHEDCHECK_REQUIRE_VLLM"

NOT_FIXED = (99,)  # no release has the fix yet: its test must fail on CI's release

# Each vLLM finding's first release without the bug (docs/findings.md, read in vLLM's code
# and shown by its test on the releases beside it): its test fails before, passes from it.
FIXED_IN = {
    "VLLM_01": (0, 11, 1),  # vllm-project/vllm#26661
    "VLLM_03": (0, 33, 0),  # the priority pass `continue`s
    "VLLM_04": (0, 22, 0),  # vllm-project/vllm#42117
    "VLLM_05": NOT_FIXED,  # unreported: the padding's `break` under a small budget
    "VLLM_06": (0, 27, 0),  # the stale-output rework (#48245) replaced the discard counter
    "VLLM_07": (0, 25, 0),  # no rollback while stale frames are discarded (#46066)
    "VLLM_09": NOT_FIXED,  # vllm-project/vllm#43569, open: eager caching rolled back
    "VLLM_10": (0, 32, 0),  # a new request's lookahead slots (#43733, read in 0.32.0)
    "VLLM_14": NOT_FIXED,  # vllm-project/vllm#42489, PR #42502 open: a session past max_model_len
    "VLLM_15": NOT_FIXED,  # vllm-project/vllm PR #49439, open: sessions hold the pool
    "VLLM_16": (0, 32, 0),  # a session's stale block hashes under async scheduling (#49377)
    "VLLM_13": NOT_FIXED,  # vllm-project/vllm#45138, PR #49252 open: placeholders kept
    "VLLM_17": (0, 31, 0),  # a finished load behind a queue head it cannot allocate (#45388)
    "VLLM_18": (0, 33, 0),  # the offloading connector's flush leaves a same-step load
    "VLLM_21": (0, 30, 0),  # preemption cascades over deferred frees (#49674, PR #49675)
    "VLLM_22": (0, 27, 0),  # the offloading connector dies on an unscheduled abort (#49118)
}
# ... and, where it came later than the first release CI could pin, the first with the bug
INTRODUCED_IN = {
    "VLLM_06": (0, 22, 0),  # #42117's count of placeholders as frames to discard
    "VLLM_21": (0, 27, 0),  # deferred frees (0.26, #45357) and stale output dropped (0.27)
    "VLLM_22": (0, 26, 0),  # 0.26 keeps a finished request's state for _build_store_jobs
}

CONFTEST = """import functools
import sys

sys.path.insert(0, {root!r})
from tests.engine_subjects.vllm.mutants import {name} as mutate  # noqa: E402
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402

_init = Scheduler.__init__


@functools.wraps(_init)  # the test reads the signature
def __init__(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    if not getattr(self, "_mutated", False):
        self._mutated = True
        mutate(self)


Scheduler.__init__ = __init__
"""


def _installed() -> tuple[int, ...]:
    if importlib.util.find_spec("vllm") is None:
        if os.environ.get(REQUIRE):
            pytest.fail(f"vLLM is not installed; {REQUIRE} is set, so these tests must run")
        pytest.skip("vLLM is not installed (.ci/run installs it: .ci/vllm-requirements.txt)")
    version = importlib.metadata.version("vllm").split("+")[0]
    return tuple(int(p) for p in version.split(".")[:3] if p.isdigit())


def run_test(test: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    """The exported test as its maintainers run it: pytest alone, in a folder of its own."""
    return run_exported([test], folder)


def _two(modes: tuple[str, ...]) -> tuple[str, ...]:
    """A sync mode and an async one of the release's, the v2 protocol's where it has it: the
    exported test's runner samples from the scheduler's view, as vLLM's v2 runner does (a v1
    runner's own copy of the tokens, which a scheduler bug can make differ, is not played)."""
    ordered = sorted(modes, key=lambda m: not m.endswith("-v2"))
    return tuple(next(m for m in ordered if m.startswith(s)) for s in ("sync", "async"))


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalEngine]:
    _installed()
    asked = argparse.Namespace(async_scheduling=None, runner=None, modes="all", features="spec")
    every = vllm_setup(None, asked)
    both = dataclasses.replace(every, modes=_two(every.modes))
    local = LocalEngine(VLLM, both)
    local.use(VLLM.settle(both, local.run))  # the drafters the release runs in each mode
    yield local
    local.stop()


@pytest.mark.parametrize(
    ("name", "scheduling"),
    [
        ("double_free", "sync"),
        ("loses_preempted", "sync"),
        ("keeps_computed", "sync"),  # a read of KV nobody wrote (E2), kept by the test
        ("placeholders_kept", "async"),
        ("rejected_kept", "sync"),  # speculative decoding: the test drives its drafts
        ("lookahead_unreserved", "async"),  # a draft model or head: its lookahead (E17)
    ],
)
def test_an_export_fails_on_the_mutant_and_passes_on_the_release(
    engine: LocalEngine, tmp_path: Path, name: str, scheduling: str
) -> None:
    mutant = next(m for m in MUTANTS if m.name == name)
    features = engine.setup.features(VLLM.features)
    if not mutant.drafts:
        features = dataclasses.replace(features, drafts=0)
    _exported_mutant(engine, tmp_path, name, scheduling, features)


@pytest.fixture(scope="module")
def sessions() -> Iterator[LocalEngine]:
    """The release with streaming-input sessions (0.15 on), in a sync and an async mode."""
    yield from local_vllm(
        argparse.Namespace(async_scheduling=None, runner=None, modes="all", features="sessions"),
        lambda s: s.sessions,
        "this release has no streaming-input sessions (0.15 on)",
    )


@pytest.mark.parametrize(
    ("name", "scheduling"),
    [("chunk_without_kv", "sync"), ("chunk_without_kv", "async"), ("session_blocks_kept", "sync")],
)
def test_a_session_s_export_sends_its_chunks_and_fails_on_the_mutant_only(
    sessions: LocalEngine, tmp_path: Path, name: str, scheduling: str
) -> None:
    """A session's chunks and close sent at their steps, each a Request of its id (SENT,
    send()), and its output read as its client was streamed it: the export of a sessions
    mutant's failure fails on the mutant and passes on the release."""
    features = dataclasses.replace(
        sessions.setup.features(VLLM.features), drafts=0, caps=False, sessions=1
    )
    text = _exported_mutant(sessions, tmp_path, name, scheduling, features)
    assert "SENT = {" in text and "resumable=chunk is not None" in text


@pytest.fixture(scope="module")
def offloading() -> Iterator[LocalEngine]:
    """The release with its own offloading connector (the job protocol, 0.2x on)."""
    yield from local_vllm(
        argparse.Namespace(async_scheduling=None, runner=None, modes="all", features="connector"),
        lambda s: "offloading" in s.connectors,
        "this release's offloading connector does not speak the job protocol",
    )


@pytest.mark.parametrize("scheduling", ["sync", "async"])
def test_an_offloading_run_s_export_plays_its_worker_and_fails_on_the_mutant_only(
    offloading: LocalEngine, tmp_path: Path, scheduling: str
) -> None:
    """vLLM's own OffloadingConnector built by the test (its CPU tier of OFFLOAD_BLOCKS
    blocks), its worker played at the level of jobs as the run played it (Offload: each
    job's JOB_STEPS, a flush and a synchronous load before the forward pass): the export
    of a mutant's failure (a finished load never taken, E5) fails on the mutant and passes
    on the release."""
    features = dataclasses.replace(
        offloading.setup.features(VLLM.features),
        drafts=0,
        connectors=("offloading",),
        load_failures=("fail",),
        sessions=0,
    )
    text = _exported_mutant(offloading, tmp_path, "recv_ignored", scheduling, features)
    assert 'kv_connector="OffloadingConnector"' in text and "JOB_STEPS = {" in text


@pytest.fixture(scope="module")
def connected() -> Iterator[LocalEngine]:
    """The release with a KV connector registered by module path, and its failure policy."""
    yield from local_vllm(
        argparse.Namespace(async_scheduling=None, runner=None, modes="all", features="connector"),
        lambda s: "simulated" in s.connectors and "fail" in s.load_failures,
        "this release registers no connector by module path, or has no failure policy",
    )


@pytest.mark.parametrize(("name", "scheduling"), [("invalid_block_counted", "sync")])
def test_a_run_of_schedcheck_s_connector_is_exported_with_its_connector_written_in(
    connected: LocalEngine, tmp_path: Path, name: str, scheduling: str
) -> None:
    """schedcheck's connector written into the test (StoreConnector, registered by the
    test's module path) and its worker played as the run played it (Transfers: each
    request's TRANSFER_STEPS, LOAD_FAILS, a model that reads a failed load's KV says a
    wrong token): the export of a mutant's failure (blocks whose load failed counted as
    computed, E7) fails on the mutant and passes on the release."""
    features = dataclasses.replace(
        connected.setup.features(VLLM.features),
        drafts=0,
        connectors=("simulated",),
        load_failures=("fail",),
        sessions=0,
    )
    text = _exported_mutant(connected, tmp_path, name, scheduling, features)
    assert 'kv_connector="StoreConnector"' in text and "LOAD_FAILS = {" in text


def _exported_mutant(
    local: LocalEngine, tmp_path: Path, name: str, scheduling: str, features: Features
) -> str:
    """The mutant's failure, searched in the release's `scheduling` mode, exported: the test
    fails on the mutant (a conftest.py beside it patches vLLM) and passes on the release."""
    mutant = next(m for m in MUTANTS if m.name == name)
    mode = next(m for m in _two(local.setup.modes) if m.startswith(scheduling))
    checks = [c for c in active(frozenset(), VLLM.policies_on) if c not in mutant.off]
    local.loaded.build.patch = mutant.patch
    try:
        found = search_engine(local, 1000, checks, True, unkeyed(features), (mode,))
    finally:
        local.loaded.build.patch = None
    assert found.failure is not None, f"{name} was not caught"
    verdict = found.failure[1]
    setup = dataclasses.replace(local.setup, modes=(mode,))
    rendered = VLLM.render(setup, verdict.trace)
    assert not isinstance(rendered, str), rendered
    test = tmp_path / f"test_{name}.py"
    test.write_text(export_test(verdict, rendered, "vLLM", "schedcheck engine --engine vllm"))
    text = test.read_text()
    assert "schedcheck" not in "".join(
        line for line in text.splitlines() if line.startswith(("import", "from"))
    )
    assert f"(schedcheck's {mutant.check})" in text and "@pytest.mark.cpu_test" in text
    (tmp_path / "buggy").mkdir()
    (tmp_path / "buggy" / "conftest.py").write_text(CONFTEST.format(root=str(ROOT), name=name))
    failed = run_test(test, tmp_path / "buggy")
    # E6's property is the step itself: the engine's own exception fails the test
    said = "AssertionError" if mutant.check != "E6" else "Error: "
    assert failed.returncode == 1 and said in failed.stdout, failed.stdout[-3000:]
    fixed = run_test(test, tmp_path / "fixed")
    assert fixed.returncode == 0, fixed.stdout[-3000:]
    return text


@pytest.mark.parametrize("finding", sorted(FINDINGS.glob("VLLM_*.py")), ids=lambda p: p.stem)
def test_a_vllm_finding_s_test_fails_where_the_bug_is_and_passes_where_it_was_fixed(
    finding: Path, tmp_path: Path
) -> None:
    """On CI's pinned release (0.34.0): every finding fixed by then passes."""
    installed = _installed()
    assert finding.stem in FIXED_IN, f"{finding.name}: say in FIXED_IN which release fixed it"
    done = run_test(finding, tmp_path)
    if installed >= FIXED_IN[finding.stem] or installed < INTRODUCED_IN.get(finding.stem, ()):
        assert done.returncode == 0, f"{finding.stem} is back:\n{done.stdout[-3000:]}"
    else:
        assert done.returncode == 1 and "AssertionError" in done.stdout, done.stdout[-3000:]


def test_a_draft_schedule_by_batch_size_is_exported_as_the_scheduler_asks(
    engine: LocalEngine, tmp_path: Path
) -> None:
    """Dynamic draft lengths (0.33 on: num_speculative_tokens_per_batch_size): the test
    builds the schedule into its SpeculativeConfig and its proposer drafts what the
    scheduler asks after each step (num_spec_tokens_to_schedule). A mutant's failure found
    without a schedule, run again with one that drafts less in larger batches, fails there
    too, and its export fails on the mutant and passes on the release."""
    if _installed() < (0, 33, 0):
        pytest.skip("draft schedules by batch size are vLLM 0.33's and later")
    mutant = next(m for m in MUTANTS if m.name == "rejected_kept")
    mode = next(m for m in engine.setup.modes if m.startswith("sync"))
    checks = [c for c in active(frozenset(), VLLM.policies_on) if c not in mutant.off]
    engine.loaded.build.patch = mutant.patch
    try:
        features = unkeyed(engine.setup.features(VLLM.features))
        found = search_engine(engine, 1000, checks, True, features, (mode,))
        assert found.failure is not None, "rejected_kept was not caught"
        w = found.failure[0]
        # three drafts after a step of one request, one after a step of two or more
        roomy = dataclasses.replace(w.config, max_num_seqs=2, max_num_batched_tokens=8)
        scheduled = dataclasses.replace(
            w, config=roomy, drafts=3, draft_schedule=((1, 1, 3), (2, 8, 1))
        )
        verdict = verify_engine(engine, scheduled, checks)
    finally:
        engine.loaded.build.patch = None
    assert not verdict.ok, "the mutant passes under the schedule"
    # pairs draft one token at most, where num_speculative_tokens alone would give three
    paired = [x.drafts for s in verdict.trace.steps if len(s.scheduled) >= 2 for x in s.scheduled]
    assert paired and max(paired) == 1, paired
    setup = dataclasses.replace(engine.setup, modes=(mode,))
    rendered = VLLM.render(setup, verdict.trace)
    assert not isinstance(rendered, str), rendered
    test = tmp_path / "test_scheduled.py"
    test.write_text(export_test(verdict, rendered, "vLLM", "schedcheck engine --engine vllm"))
    assert "num_speculative_tokens_per_batch_size=SCHEDULE" in test.read_text()
    (tmp_path / "buggy").mkdir()
    (tmp_path / "buggy" / "conftest.py").write_text(
        CONFTEST.format(root=str(ROOT), name="rejected_kept")
    )
    failed = run_test(test, tmp_path / "buggy")
    # E6's property is the step itself: the engine's own exception fails the test
    said = "AssertionError" if mutant.check != "E6" else "Error: "
    assert failed.returncode == 1 and said in failed.stdout, failed.stdout[-3000:]
    fixed = run_test(test, tmp_path / "fixed")
    assert fixed.returncode == 0, fixed.stdout[-3000:]


@pytest.fixture(scope="module")
def hybrid() -> Iterator[LocalEngine]:
    """The release with hybrid models drawn (its planner lays them out: 0.22 on)."""
    yield from local_vllm(
        argparse.Namespace(async_scheduling=None, runner=None, modes="all", features="hybrid"),
        lambda s: bool(s.layers),
        "this release's planner lays out no hybrid model",
    )


@pytest.mark.parametrize("scheduling", ["sync", "async"])
def test_a_hybrid_model_s_run_is_exported_with_its_groups_laid_out_by_vllm(
    hybrid: LocalEngine, tmp_path: Path, scheduling: str
) -> None:
    """A hybrid model's groups laid out in the test by vLLM's own planner, as the run laid
    them out (LAYERS, hybrid_kv_cache_config): the export of a mutant's failure (a window's
    or chunk's blocks for a step counted one short: the allocation then raises, E6) fails
    on the mutant and passes on the release."""
    features = dataclasses.replace(
        hybrid.setup.features(VLLM.features), drafts=0, connectors=(), sessions=0
    )
    text = _exported_mutant(hybrid, tmp_path, "estimate_one_short", scheduling, features)
    assert "LAYERS = [" in text and "hybrid_kv_cache_config(vllm_config, spec)" in text
