"""A pytest plugin that breaks schedcheck on purpose, to show that `schedcheck check`
reports our own faults as ours (exit 3), never as a verdict on the submission.

Loaded into check's pytest run with PYTEST_ADDOPTS="-p tests.inject_fault"; the fault is
SCHEDCHECK_INJECT: "check" (a check that raises), "health" (a strategy Hypothesis cannot
satisfy: a health check fails).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from schedcheck.invariants import checks
from schedcheck.invariants.evidence import Evidence
from schedcheck.invariants.violation import Violation
from schedcheck.strategies import workloads

FAULT = os.environ.get("SCHEDCHECK_INJECT", "")


def _raising_check(ev: Evidence) -> Iterator[Violation]:
    raise RuntimeError("injected: a check of schedcheck's own raised")
    yield  # a generator, as every check is


if FAULT == "check":
    checks.CHECKS["I2"] = _raising_check
elif FAULT == "health":
    _ANY = workloads.any_workloads().filter(lambda w: False)
    workloads.any_workloads = lambda: _ANY
