"""Check one implementation on one workload: run it, its never-preempting twin, the reference."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from schedcheck.drive.driver import run
from schedcheck.drive.impl import Implementation, InProcess
from schedcheck.drive.isolated import Isolated
from schedcheck.drive.loader import REFERENCE, load_impl
from schedcheck.faults import CheckerError, CheckFailed
from schedcheck.invariants.catalogue import CATALOGUE
from schedcheck.invariants.checks import CHECKS, check_trace
from schedcheck.invariants.violation import Violation
from schedcheck.model.trace import Trace
from schedcheck.model.workload import Script, Workload
from schedcheck.verdict.report import failure_report


@dataclass(frozen=True)
class Verdict:
    """What the checks found on one workload; `ok` when nothing fired."""

    trace: Trace
    violations: list[Violation]
    output: str = ""  # what the implementation printed while running the trace

    @property
    def ok(self) -> bool:
        return not self.violations

    def require(self, hints: str = "") -> None:
        """Raise CheckFailed, with the full report (and `hints`), unless every check held."""
        if not self.ok:
            text = f"\n{self.report()}" + (f"\n\n{hints}" if hints else "")
            first = self.violations[0]
            raise CheckFailed(first.check, text, rank(first, self.trace.workload))

    def report(self) -> str:
        if self.ok:
            return "all checks hold"
        return failure_report(self.violations[0], self.trace, self.output)


# What a long run's trace can be judged by (Workload.sample_every): between samples its
# states hold the counters alone, which every other check would read as a scheduler
# without sequences. Lockstep (R1) compares what each call returned and the counters at
# every call, the whole state at every sample; the contract (C1) is every call's.
SAMPLED = ("C1", "R1")


def verify(
    impl: Implementation | ModuleType,
    workload: Workload,
    checks: tuple[str, ...] = tuple(CHECKS),
    lockstep: bool | None = None,
    script: Script | None = None,
    expected: Trace | None = None,
) -> Verdict:
    """Run `checks` on `impl`, with only the runs they need (as the catalogue says): the
    never-preempting twin for D1, the reference for R1 (by default only where `impl` is not
    the reference). With a `script`, the stateful run of its calls instead (the stateful
    stage's: no twin, no reference; D1 holds outputs to the model's own). `expected` is
    the reference's trace where the caller has it already (grade runs it once a class)."""
    if isinstance(impl, ModuleType):
        impl = InProcess(impl, getattr(impl, "__file__", None) or impl.__name__)
    if workload.sample_every:
        checks = tuple(c for c in checks if c in SAMPLED)
    if script is not None:
        trace = impl.play(workload, script)
        return Verdict(trace, check_trace(trace, only=checks), impl.output)
    if lockstep is None:
        lockstep = impl.label != REFERENCE
    needed = [CATALOGUE[check] for check in checks]
    reference = lockstep and any(c.needs_reference for c in needed)
    known = expected if reference else None
    if known is not None and isinstance(impl, Isolated):
        impl.expect(known)  # what matches the reference's is taken as its steps, unread
    trace, expected = impl.run_while(
        workload, lambda: run(load_impl(), workload) if reference and known is None else known
    )
    output = impl.output
    twin = impl.run(workload.unconstrained()) if any(c.needs_twin for c in needed) else None
    _sound(expected)
    return Verdict(trace, check_trace(trace, expected, twin, only=checks), output)


def _sound(expected: Trace | None) -> None:
    """The reference's run is ours: one that failed is our fault (exit 3), never a verdict
    on the implementation held to it."""
    if expected is not None and expected.failure is not None:
        raise CheckerError(f"the reference failed on this workload: {expected.failure}")


def verify_pair(
    impl: Implementation,
    first: Workload,
    second: Workload,
    checks: tuple[str, ...],
    lockstep: bool | None = None,
    expected: tuple[Trace, Trace] | None = None,
) -> tuple[Verdict, Verdict]:
    """Two schedulers of `impl` alive at once (issue 47: driver.run_pair), each trace judged
    by `checks` against a reference run of its own workload (R1; `expected`, the
    reference's traces of `first` and `second` run alone, where the caller has them
    already). Where a call of one broke the contract, the other's run stopped with it:
    only the one that broke is judged (the other's trace ends early by no doing of its
    own). No twin run: D1 is no check of a pair."""
    if lockstep is None:
        lockstep = impl.label != REFERENCE
    assert not any(CATALOGUE[c].needs_twin for c in checks), "a pair has no twin run"
    reference = lockstep and any(CATALOGUE[c].needs_reference for c in checks)
    if reference and expected is not None and isinstance(impl, Isolated):
        impl.expect(*expected)
    traces = impl.run_pair(first, second)
    stopped = any(trace.failure is not None for trace in traces)
    verdicts = []
    for k, trace in enumerate(traces):
        if stopped and trace.failure is None:
            verdicts.append(Verdict(trace, [], impl.output))
            continue
        want = None
        if reference:
            want = run(load_impl(), trace.workload) if expected is None else expected[k]
        _sound(want)
        verdicts.append(Verdict(trace, check_trace(trace, want, only=checks), impl.output))
    return verdicts[0], verdicts[1]


def rank(violation: Violation, workload: Workload) -> tuple[int, int, int]:
    """How informative a failure is to read, smaller first: the earliest step it shows at,
    then the fewest requests, then the fewest tokens (Workload.size)."""
    requests, tokens, _ = workload.size()
    return (violation.step, requests, tokens)
