"""Bounded-exhaustive checking (issue 18): the reference and the equivalents pass, every
mutant of the catalogue fails the default scope with the check its docstring names, and the
visited set runs fewer workloads than the scope's enumeration with the same verdicts.
(`check --exhaustive` itself, isolated: tests/product/test_equivalents.py, every equivalent on the
default scope with -m costly.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from schedcheck import faults
from schedcheck.cli.main import main
from schedcheck.drive.impl import Implementation, open_impl, reference
from schedcheck.sandbox.process import Limits
from schedcheck.search.exhaustive import check_exhaustive, explore_spaces
from schedcheck.strategies.exhaustive import KINDS, SCOPES, Scope
from schedcheck.strategies.workloads import REVERSED
from schedcheck.verdict.verify import verify
from tests.catalogue import HANGING, expected_checks, standalone
from tests.helpers import ROOT, rotation_day

# A mutant whose bug needs what every scope holds fixed (an eos id past 256, a hundred
# requests) says so in its docstring: the larger stage and the random search find those.
MUTANTS = sorted(
    p
    for p in (ROOT / "tests" / "mutants").glob("*.py")
    if "Outside the exhaustive scopes" not in p.read_text()
)
EQUIVALENTS = sorted((ROOT / "tests" / "equivalents").glob("*.py"))
HANGS = HANGING
CHUNKS = 8  # the default run explores one eighth of the scope, another each day
SMALL = SCOPES["small"]


def load(path: Path) -> Implementation:
    """In process for speed (our own files); isolated where the bug is a hang."""
    if path.stem in HANGS:
        return open_impl(standalone(path), limits=Limits(call_timeout=0.5))
    return open_impl(standalone(path), in_process=True)


def test_a_scope_writes_each_workload_once() -> None:
    workloads = list(SCOPES["smoke"].workloads())
    assert len(workloads) == len(set(map(repr, workloads))) > 100
    for w in workloads:
        assert w.requests[0].arrival == 1 and not w.infeasible()
        names = [r.seq_id for r in w.requests]
        assert names == [REVERSED(i) for i in range(1, len(w.requests) + 1)]
        assert len(names) < 2 or sorted(names) == names[::-1]  # not arrival order
        assert all(
            p < r.max_tokens - 1 for r in w.requests for s, p in w.model.eos_at if s == r.seq_id
        )


def test_a_config_keeps_only_the_kinds_that_fit_it() -> None:
    scope = Scope("t", (3,), (1,), (1,), (3,), ((1, 1), (2, 2), (5, 1)), 1, 1, 1)
    (space,) = scope.spaces()
    assert space.kinds == ((1, 1), (2, 2))  # 5+1 needs 5 blocks of 1: it never fits in 3


@pytest.mark.heavy
@pytest.mark.parametrize(
    "chunk",
    [
        pytest.param(c, marks=() if c == rotation_day() % CHUNKS else pytest.mark.costly)
        for c in range(CHUNKS)
    ],
)
def test_the_reference_passes_the_default_scope(chunk: int) -> None:
    """An eighth of the scope in the default run (another each day), all of it with -m
    costly."""
    scan = explore_spaces(reference(), SMALL.spaces()[chunk::CHUNKS])
    assert scan.failure is None, scan.failure[1].report()
    assert scan.finished and scan.states > 100


# The default run explores the smoke scope on three equivalents (others each day), -m costly
# on every one.
SMOKED = {EQUIVALENTS[(3 * rotation_day() + k) % len(EQUIVALENTS)] for k in range(3)}


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=() if p in SMOKED else pytest.mark.costly) for p in EQUIVALENTS],
    ids=lambda p: p.stem,
)
def test_an_equivalent_passes_the_smoke_scope(path: Path) -> None:
    scan = explore_spaces(load(path), SCOPES["smoke"].spaces())
    assert scan.failure is None, scan.failure[1].report()


# The default run explores the default scope on a rotating few mutants, -m costly on all.
EXPLORED = {MUTANTS[(7 * rotation_day() + k) % len(MUTANTS)] for k in range(4)}


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=() if p in EXPLORED else pytest.mark.costly) for p in MUTANTS],
    ids=lambda p: p.stem,
)
def test_the_default_scope_catches_the_mutant(path: Path) -> None:
    impl = load(path)
    try:
        scan = explore_spaces(impl, SMALL.spaces())
    finally:
        impl.stop()
    assert scan.failure is not None, f"{path.stem} passes {scan.edges} transitions"
    workload, verdict = scan.failure
    fired = {v.check for v in verdict.violations}
    assert fired & expected_checks(path), verdict.report()
    assert not verify(load(path), workload).ok  # the path replays as a workload


# Three requests, two or three running, preemption: where paths meet often.
COMPARED = Scope("compared", (3, 5), (1, 2), (2, 3), (4,), KINDS, 3, 2, 2)


@pytest.mark.costly  # every file of the catalogue, explored and enumerated: 40 s
def test_the_visited_set_runs_fewer_workloads_with_the_same_verdicts() -> None:
    """Explored against the same scope's enumeration, on every file of the catalogue."""
    scope = COMPARED
    workloads, passed = list(scope.workloads()), []
    for path in EQUIVALENTS[:1] + MUTANTS:
        impl = load(path)
        try:
            scan = explore_spaces(impl, scope.spaces())
            enumerated = next((w for w in workloads if not verify(impl, w).ok), None)
        finally:
            impl.stop()
        assert (scan.failure is None) == (enumerated is None), path.stem
        if scan.failure is None:
            assert scan.edges < len(workloads), (scan.edges, len(workloads))
            passed.append(path.stem)
    # Not vacuous: the correct files pass, and most mutants fail both ways.
    assert passed[0] == EQUIVALENTS[0].stem and len(passed) < len(MUTANTS) / 4


# The reference until three sequences run at once, deep in the search; then it turns.
TURNS = {
    "exits": "os._exit(0)",
    "hangs": "while True: pass",
    "lies": "return Always({'a1': 1})",
}


# One turn a day in the default run (each explores seconds before it turns), all three with
# -m costly.
TURNED = sorted(TURNS)[rotation_day() % len(TURNS)]


@pytest.mark.heavy
@pytest.mark.parametrize(
    "turn",
    [pytest.param(t, marks=() if t == TURNED else pytest.mark.costly) for t in sorted(TURNS)],
)
def test_a_turn_mid_exploration_is_a_failure_with_its_path(turn: str, tmp_path: Path) -> None:
    source = f"""
import os
from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus


class Always(dict):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = None


class Scheduler(_Reference):
    def schedule(self):
        if len(self.running) == 3:
            {TURNS[turn]}
        return super().schedule()
"""
    (tmp_path / "turns.py").write_text(source)
    path = standalone(tmp_path / "turns.py")
    scan = check_exhaustive(str(path), SMALL, 2, Limits(call_timeout=0.5))
    assert scan.failure is not None and scan.edges > 50  # it ran a while before the turn
    workload, verdict = scan.failure
    assert verdict.violations[0].check == "C1", verdict.report()
    impl = open_impl(path, limits=Limits(call_timeout=0.5))
    try:
        assert not verify(impl, workload).ok  # the path is the counterexample
    finally:
        impl.stop()


def test_check_exhaustive_reports_a_path_that_replays(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    source = ROOT / "tests" / "mutants" / "preempts_neighbour.py"
    mutant = str(standalone(source))
    saved, html = tmp_path / "found", tmp_path / "trace.html"
    code = main(
        ["check", mutant, "--exhaustive", "--save-failures", str(saved), "--html", str(html)]
    )
    out = capfd.readouterr().out
    assert code == faults.FAIL, out
    assert "stopped at the first failure after" in out and "shortest failing path" in out
    assert html.read_text().startswith("<!DOCTYPE html>")
    report = out[out.index("shortest failing path found") :]
    assert any(f"\n{check} at step" in report for check in expected_checks(source)), report
    (replayable,) = saved.glob("*.json")
    assert f"--replay {replayable}" in out
    assert main(["check", mutant, "--replay", str(replayable)]) == faults.FAIL


@pytest.mark.costly  # a second exhaustive search, 5 s
def test_check_exhaustive_reports_the_same_path_every_time(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    mutant = str(standalone(ROOT / "tests" / "mutants" / "preempts_neighbour.py"))
    reports = []
    for run in ("saved-by-run-1", "saved-by-run-2"):
        code = main(["check", mutant, "--exhaustive", "--save-failures", str(tmp_path / run)])
        assert code == faults.FAIL
        out = capfd.readouterr().out
        reports.append(out.split("shortest failing path found")[1].replace(run, "RUN"))
    assert reports[0] == reports[1]
