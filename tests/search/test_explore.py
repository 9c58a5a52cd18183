"""The state-space explorer (schedcheck/search/explore.py, issue 18's first version): correct
files explore clean, a mutant fails on a path of the fewest steps, and the visited set
explores fewer transitions than the tree of paths with the same verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedcheck.drive.impl import Implementation, open_impl
from schedcheck.model.workload import Config
from schedcheck.search.explore import canonical, explore, preemptions
from schedcheck.strategies.exhaustive import SCOPES, Space
from schedcheck.verdict.verify import verify
from tests.catalogue import standalone
from tests.helpers import ROOT

# Preemption is reachable (3 blocks of 2 tokens for two requests of up to 5 tokens), eos
# choices are live (eos_token_id 0), two arrival steps.
SPACE = Space(Config(3, 2, 2, 4, 0), ((1, 1), (2, 3), (3, 2)), 2, 2, 2)


def load(path: Path, isolated: bool = False) -> Implementation:
    return open_impl(standalone(path), in_process=not isolated)


@pytest.mark.parametrize("name", ["one_pass", "dataclass_auto", "nano_style"])
def test_a_correct_file_explores_clean(name: str) -> None:
    found = explore(load(ROOT / "tests" / "equivalents" / f"{name}.py"), [SPACE])
    assert found.failure is None
    assert found.states >= 10 and found.edges >= found.states


def test_a_correct_file_explores_clean_in_its_box() -> None:
    impl = load(ROOT / "tests" / "equivalents" / "while_true.py", isolated=True)
    try:
        found = explore(impl, [SPACE])
    finally:
        impl.stop()
    assert found.failure is None and found.states >= 10


def test_a_mutant_fails_on_a_shortest_path() -> None:
    impl = load(ROOT / "tests" / "mutants" / "preempts_oldest.py")
    found, tree = explore(impl, [SPACE]), explore(impl, [SPACE], dedup=False)
    assert found.failure is not None and tree.failure is not None
    workload, verdict = found.failure
    assert verdict.violations[0].check in {"F1", "I4"}
    assert not verify(impl, workload).ok  # the path replays as a workload
    assert verdict.violations[0].step == tree.failure[1].violations[0].step


@pytest.mark.parametrize(
    "path",
    [ROOT / "tests" / "equivalents" / "one_pass.py", ROOT / "tests" / "mutants" / "eos_ignored.py"],
    ids=["correct", "eos_ignored"],
)
def test_the_visited_set_explores_fewer_transitions(path: Path) -> None:
    impl = load(path)
    found, tree = explore(impl, [SPACE]), explore(impl, [SPACE], dedup=False)
    assert (found.failure is None) == (tree.failure is None)
    if found.failure is None:
        assert found.edges < tree.edges


def test_a_sequences_preemptions_are_part_of_its_state() -> None:
    """Two paths to equal snapshots, one through a preemption: kept apart, since a
    submission may remember whom it preempted (exception_on_rare_path does)."""
    impl = load(ROOT / "tests" / "equivalents" / "one_pass.py")
    for workload in SCOPES["small"].workloads():
        trace = impl.run(workload)
        for k in range(1, len(trace.steps) + 1):
            state, counts = trace.steps[k - 1].last(), preemptions(trace, k)
            live = {sid for sid, seq in state.seqs.items() if seq.status != "FINISHED"}
            if live & set(counts):
                assert sum(counts.values()) <= state.num_preemptions
                requests = workload.requests
                assert canonical(state, requests, 0, counts) != canonical(state, requests, 0, {})
                return
    raise AssertionError("no preempted sequence alive in any workload of the scope")
