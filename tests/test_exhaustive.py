"""Bounded-exhaustive: the reference passes every workload of the `small` scope, split in
chunks that `pytest -n auto` spreads over cores, and the scope catches every mutant."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.drive.loader import load_impl
from harness.sandbox.impl import Implementation, InProcess, reference
from harness.sandbox.isolation import Isolated, Limits
from harness.search.exhaustive import scan_chunk
from strategies.exhaustive import SCOPES, enumerate_scope
from tests.catalogue import standalone
from tests.helpers import ROOT

CHUNKS = 8
MUTANTS = Path(__file__).parent / "mutants"
HANGS = {"infinite_loop_full_house"}
# Mutants whose bug needs more than the small scope holds (docs/exhaustive.md says why).
UNREACHABLE = {
    "exception_on_rare_path": "a sequence preempted twice",
    "second_preemption_keeps_num_computed": "a sequence preempted twice",
    "phase1_stops_when_budget_low": "a running sequence with more tokens left than the budget",
}


def test_enumeration_is_canonical_and_without_duplicates() -> None:
    workloads = list(enumerate_scope(SCOPES["small"]))
    assert len(workloads) == len(set(map(repr, workloads))) == 32736
    assert all(w.requests[0].arrival == 1 and not w.infeasible() for w in workloads)
    assert all(
        [r.seq_id for r in w.requests] == [f"a{i}" for i in range(1, len(w.requests) + 1)]
        for w in workloads
    )


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_reference_passes_every_workload_of_the_small_scope(chunk: int) -> None:
    scan = scan_chunk(reference(), "small", chunk, CHUNKS)
    assert scan.failure is None, scan.failure[1].report()
    assert scan.count in (32736 // CHUNKS, 32736 // CHUNKS + 1)


def test_the_unreachable_are_documented() -> None:
    doc = (ROOT / "docs" / "exhaustive.md").read_text()
    assert all(f"`{name}`" in doc for name in UNREACHABLE)


@pytest.mark.parametrize(
    "mutant", sorted(p.stem for p in MUTANTS.glob("*.py") if p.stem not in UNREACHABLE)
)
def test_small_scope_catches_the_mutant(mutant: str) -> None:
    path = MUTANTS / f"{mutant}.py"
    # In process for speed (these are our own files); isolated where the bug is a hang.
    impl: Implementation
    if mutant in HANGS:
        impl = Isolated(standalone(path), Limits(call_timeout=0.5))
    else:
        impl = InProcess(load_impl(path), str(path))
    try:
        scan = scan_chunk(impl, "small", 0, 1, first=True)
    finally:
        impl.stop()
    assert scan.failure is not None, f"{mutant} passes all {scan.count} workloads"
