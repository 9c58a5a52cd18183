"""The catalogue of checks (invariants/catalogue.py) is the one place each check is written:
every id once, with a function; the lists the suite, the grade and the reports use are
derived from it and equal the lists that were written out by hand before (kept here once,
as literals, so that a drift fails); the docs' tables and order agree with it.

The engine's checks, E1-E10 (schedcheck/engine/checks.py), follow the same pattern.
"""

from __future__ import annotations

import re
from dataclasses import FrozenInstanceError
from typing import Any, cast

import pytest

from schedcheck.engine import checks as engine_checks
from schedcheck.engine.trace import EngineFailure, EngineTrace
from schedcheck.grading import grade
from schedcheck.invariants import catalogue
from schedcheck.invariants.catalogue import (
    CATALOGUE,
    ENTRIES,
    GROUP_OF,
    IDS,
    PRIORITY,
    Check,
    ids,
    priority,
)
from schedcheck.invariants.checks import CHECKS
from schedcheck.suite import test_properties, test_state_machine
from tests.helpers import ROOT

# The lists as they were written by hand before the catalogue (issue 25, point 4).
OLD_IDS = ("C1", "I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "A1", "F1", "L1", "D1", "R1")
OLD_PRIORITY = ("C1", "I6", "I4", "I3", "I5", "I1", "I2", "I8", "A1", "I7", "F1", "D1", "L1", "R1")
OLD_GRADE_GROUPS: dict[str, tuple[str, ...]] = {
    "contract": ("C1",),
    "examples": (),
    **{check: (check,) for check in ("I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8")},
    "accounting": ("A1",),
    "fcfs": ("F1",),
    "liveness": ("L1",),
    "differential": ("D1",),
    "lockstep": ("R1",),
}
OLD_INVARIANTS = ("C1", "I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "A1", "F1", "L1")
OLD_EVERY_CALL = ("C1", "I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "A1", "F1", "D1")
# E10: vLLM; E11 and E12: its async scheduling; E13: its running pass (issue 35); E14:
# SGLang's retraction (issue 36); E17: a drafter's lookahead slots (issue 49); E20-E22: a
# refusal, an abort's stream, preemption for priority (issue 52); E23: cache namespaces
# (issue 52, a safety check); E24: prompt logprobs (issue 52, a safety check); E25: LoRA
# adapters a step runs (issue 52, a safety check)
OLD_ENGINE_IDS = tuple(f"E{n}" for n in range(1, 26))  # E1 .. E25
OLD_POLICIES = {
    "E4": True,
    "E9": False,
    "E10": False,
    "E13": False,
    "E14": False,
    "E15": False,
    "E16": False,
    "E17": False,
    "E20": True,
    "E21": True,
    "E22": False,
}


def test_every_id_has_exactly_one_entry_and_a_function_of_its_own() -> None:
    entry_ids = [c.id for c in ENTRIES]
    assert len(entry_ids) == len(set(entry_ids)), "an id with two entries"
    assert sorted(entry_ids) == sorted(OLD_IDS)
    assert all(callable(c.function) for c in ENTRIES)
    functions = [c.function for c in ENTRIES]
    assert len({id(f) for f in functions}) == len(functions), "two checks share a function"
    # Each function is named for its check (check_i1 for I1): an entry names the right one.
    assert [c.function.__name__ for c in ENTRIES] == [f"check_{c.id.lower()}" for c in ENTRIES]


def test_the_registry_of_functions_is_the_catalogue() -> None:
    assert tuple(CHECKS) == OLD_IDS  # verify()'s and check_trace()'s default order
    assert all(CHECKS[c.id] is c.function for c in ENTRIES)


def test_the_derived_lists_equal_the_old_hand_written_ones() -> None:
    assert IDS == tuple(CATALOGUE) == OLD_IDS
    assert PRIORITY == OLD_PRIORITY
    assert list(grade.GROUPS.items()) == list(OLD_GRADE_GROUPS.items())  # the report's order
    assert test_properties.INVARIANTS == OLD_INVARIANTS
    assert test_state_machine.EVERY_CALL == OLD_EVERY_CALL
    assert (*test_state_machine.EVERY_CALL, *test_state_machine.AT_THE_END) == (
        *OLD_EVERY_CALL,
        "L1",
    )


def test_groups_are_derived_from_the_entries() -> None:
    for check in ENTRIES:
        assert check.id in grade.GROUPS[check.group]
        assert GROUP_OF[check.id] == grade.GROUP_OF[check.id] == check.group
    # Every group the grade reports is some check's, but the spec's worked examples.
    assert set(grade.GROUPS) - {"examples"} == {c.group for c in ENTRIES}
    assert grade.GROUPS["examples"] == ()
    graded = [(group, checks) for group, checks in grade.GROUPS.items() if group != "examples"]
    assert list(catalogue.GROUPS.items()) == graded


def test_priority_is_the_place_in_the_catalogue() -> None:
    assert [priority(c.id) for c in ENTRIES] == list(range(len(ENTRIES)))
    assert priority("fcfs") == priority("no such check") == len(ENTRIES)  # after every check
    assert sorted(OLD_IDS, key=priority) == list(OLD_PRIORITY)


def test_rows_number_the_spec_order_once_each() -> None:
    assert sorted(c.row for c in ENTRIES) == list(range(1, len(ENTRIES) + 1))
    assert [c.id for c in sorted(ENTRIES, key=lambda c: c.row)] == list(OLD_IDS)


def test_what_each_check_needs_and_when_it_looks() -> None:
    assert ids(lambda c: c.needs_reference) == ("R1",)
    assert ids(lambda c: c.needs_twin) == ("D1",)
    assert ids(lambda c: c.when == "end of run") == ("L1",)


def test_catalogue_entries_are_immutable() -> None:
    check: Any = CATALOGUE["I1"]
    assert isinstance(check, Check)
    with pytest.raises(FrozenInstanceError):
        check.group = "other"


def _table(doc: str) -> list[list[str]]:
    """The rows of the first table whose rows start with a check id: its cells."""
    rows = re.findall(r"^\| ([A-Z]\d) \| (.*) \|$", doc, re.M)
    return [[check, *cells.split(" | ")] for check, cells in rows]


def test_docs_checks_table_states_each_rule_in_the_spec_order() -> None:
    doc = (ROOT / "docs" / "checks.md").read_text()
    rows = [row for row in _table(doc) if row[0] in CATALOGUE]
    assert [row[0] for row in rows[: len(IDS)]] == list(IDS)
    for check, rule, looks in rows[: len(IDS)]:
        assert rule == CATALOGUE[check].rule, check
        assert (looks == "end of run") == (CATALOGUE[check].when == "end of run"), check


def test_docs_give_the_priority_order() -> None:
    for name in ("checks.md", "spec.md"):
        text = " ".join((ROOT / "docs" / name).read_text().split())
        assert " ".join(PRIORITY) in text, name


def test_docs_spec_lists_every_id_in_the_spec_order() -> None:
    doc = (ROOT / "docs" / "spec.md").read_text()
    listed = doc[doc.index("## Every check id") :]
    assert [row[0] for row in _table(listed)][: len(IDS)] == list(IDS)


def test_engine_checks_are_one_catalogue_too() -> None:
    entry_ids = [c.id for c in engine_checks.ENTRIES]
    assert tuple(entry_ids) == tuple(engine_checks.CATALOGUE) == OLD_ENGINE_IDS
    assert engine_checks.POLICIES == OLD_POLICIES
    assert list(engine_checks.POLICIES) == list(OLD_POLICIES)
    # E5 and E6 share the function that reads the driver's recorded failure; no other two do.
    functions = [c.function for c in engine_checks.ENTRIES]
    shared = {c.id for c in engine_checks.ENTRIES if functions.count(c.function) > 1}
    assert shared == {"E5", "E6"}


def test_engine_runs_a_shared_function_once() -> None:
    failure = EngineFailure("E6", 3, "step()", "boom")
    trace = EngineTrace(workload=cast(Any, None), traits=cast(Any, None), failure=failure)
    found = engine_checks.check_engine(trace, ["E5", "E6"])
    assert [(v.check, v.step, v.message) for v in found] == [("E6", 3, "boom")]
