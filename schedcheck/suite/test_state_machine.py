"""The stateful test: calls in any order the contract allows (a request added between any
two steps, steps with nothing to do, a stray `update()` right after a step's), drawn as a
script (strategies/scripts.py) and played on the implementation under test in one go;
every invariant is checked on every call's result, earliest first, then the run goes on
to the end: every request must finish (L1) with the model's output (D1)."""

from __future__ import annotations

from hypothesis import given, settings

from schedcheck.drive.impl import Implementation
from schedcheck.faults import CheckFailed
from schedcheck.invariants.catalogue import ids
from schedcheck.model.workload import Script, Workload
from schedcheck.strategies.scripts import scripts
from schedcheck.suite.holds import (
    Failing,
    failed,
    found,
    give_way,
    hung,
    in_full_when_final,
    only,
    tick,
    within_budget,
)
from schedcheck.verdict.report import failure_report
from schedcheck.verdict.verify import rank, verify

# The checks that look at every call (C1, I1-I8, A1, F1, and D1 against the model's own
# output), then those only the end of a run can break (L1); not R1, which needs the reference.
EVERY_CALL = ids(lambda c: c.when == "every call" and not c.needs_reference)
AT_THE_END = ids(lambda c: c.when == "end of run" and not c.needs_reference)
CHECKS = (*EVERY_CALL, *AT_THE_END)


# Twice the profile's examples: a run costs about what a properties workload does, and
# interleavings are a larger space than a driver's runs.
@settings(max_examples=2 * settings().max_examples)
@given(scripted=scripts())
def test_state_machine(impl: Implementation, scripted: tuple[Workload, Script]) -> None:
    give_way()
    workload, script = scripted
    played = [*script, ["finish"]]
    key = workload.to_json(indent=None) + repr(played)
    within_budget(key)
    with in_full_when_final(impl):
        verdict = verify(impl, workload, only(CHECKS), script=played)
    tick()
    if not verdict.ok:
        first = verdict.violations[0]
        found(hang=hung(verdict.trace))
        failed(Failing(workload, played, first), key)
        report = "\n" + failure_report(first, verdict.trace)
        raise CheckFailed(first.check, report, rank(first, workload))
