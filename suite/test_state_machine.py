"""A stateful test: Hypothesis interleaves arrivals, steps and stray update() calls at will,
and every invariant is checked after every rule, on the implementation under test."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from harness.faults import CheckFailed, SubmissionFailure, rank
from harness.sandbox.impl import Implementation
from harness.verdict.report import failure_report
from invariants.checks import check_trace
from invariants.liveness import liveness_bound
from invariants.tokens import TokenModel
from invariants.trace import Step, Trace
from invariants.violation import Violation
from invariants.workload import Config, Request, Workload
from strategies.workloads import MAX_TOKENS, NAMINGS, configs, prompt_lens
from suite.holds import tick

_T = TypeVar("_T")
EVERY_CALL = ("C1", "I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "A1", "F1", "D1")


class SchedulerMachine(RuleBasedStateMachine):
    impl: Implementation  # set by the test: the implementation under test

    @initialize(config=configs(), seed=st.integers(0, 2**16), eos=st.sampled_from([0, 300]),
                naming=st.sampled_from([name for _, name in NAMINGS]))  # fmt: skip
    def start(self, config: Config, seed: int, eos: int, naming: Callable[[int], str]) -> None:
        self.config = config
        self.naming = naming  # seq_ids whose sorted order need not be arrival order
        self.model = TokenModel(seed=seed, eos_per_mille=eos)
        self.session = self._call(lambda: self.impl.session(Workload(config, (), self.model)))
        self.requests: list[Request] = []
        self.steps: list[Step] = []

    def trace(self) -> Trace:
        return Trace(Workload(self.config, tuple(self.requests), self.model), tuple(self.steps))

    def _call(self, action: Callable[[], _T]) -> _T:
        """A call into the implementation; a failed one is a C1 verdict on this trace."""
        try:
            return action()
        except SubmissionFailure as e:
            failure = e.failure
            trace = replace(self.trace(), failure=failure)
            violation = Violation("C1", failure.step, failure.call, failure.message)
            report = "\n" + failure_report(violation, trace)
            raise CheckFailed("C1", report, rank(violation, trace.workload)) from None

    def _require(self, trace: Trace, checks: tuple[str, ...], since: int = 1) -> None:
        found = check_trace(trace, only=checks, since=since)
        if found:
            report = "\n" + failure_report(found[0], trace)
            raise CheckFailed(found[0].check, report, rank(found[0], trace.workload))

    @rule(data=st.data())
    def add_request(self, data: st.DataObject) -> None:
        capacity = self.config.num_blocks * self.config.block_size
        max_tokens = data.draw(st.integers(1, min(MAX_TOKENS, capacity)), label="max_tokens")
        most = min(24, capacity - max_tokens + 1)
        prompt_len = data.draw(prompt_lens(self.config.block_size, most), label="prompt_len")
        name = self.naming(len(self.requests) + 1)
        request = Request(name, prompt_len, max_tokens, len(self.steps) + 1)
        self.requests.append(request)
        self._call(lambda: self.session.add(request))

    @rule()
    def step(self) -> None:
        number = len(self.steps) + 1
        arrivals = tuple(r.seq_id for r in self.requests if r.arrival == number)
        schedule, scheduled = self._call(self.session.schedule)
        self.steps.append(Step(number, arrivals, schedule, scheduled, None))
        update = self._call(self.session.update)
        self.steps[-1] = replace(self.steps[-1], update=update)

    @precondition(
        lambda self: (
            self.steps
            and self.steps[-1].again is None
            and not any(r.arrival > len(self.steps) for r in self.requests)
        )
    )
    @rule()
    def update_again(self) -> None:
        """update() with no schedule() since the last one: returns [] and changes nothing.

        Only right after a step's update(): a request added in between belongs to the next
        step, and a driver step never adds between update() and update() again.
        """
        again = self._call(lambda: self.session.update("update() again"))
        self.steps[-1] = replace(self.steps[-1], again=again)

    @invariant()
    def every_invariant_holds(self) -> None:
        if not hasattr(self, "session"):
            return
        self._require(self.trace(), EVERY_CALL, since=max(1, len(self.steps)))

    def _all_finished(self) -> bool:
        if not self.steps or any(r.arrival > len(self.steps) for r in self.requests):
            return False
        return all(s.status == "FINISHED" for s in self.steps[-1].last().seqs.values())

    def teardown(self) -> None:
        """Run to the end: every request must finish (L1) with the model's output (D1)."""
        if not hasattr(self, "session"):
            return
        for _ in range(liveness_bound(self.trace().workload)):
            if self._all_finished():
                break
            self.step()
        self._require(self.trace(), (*EVERY_CALL, "L1"))
        tick()


SHARDS = 2  # the stateful runs in halves, one per core under xdist (the check uses two)


@pytest.mark.parametrize("shard", range(SHARDS))
def test_state_machine(impl: Implementation, shard: int) -> None:
    # A machine class of its own name per shard: Hypothesis derives a derandomized run's
    # seed (and the database key) from it, so the shards try different runs, together as
    # many as one test would (max_examples split between them).
    machine = type(f"Machine{shard}", (SchedulerMachine,), {"impl": impl})
    examples = -(-settings().max_examples // SHARDS)
    # Short runs: the bugs live in a few steps, and short runs shrink fast.
    run_state_machine_as_test(  # type: ignore[no-untyped-call,unused-ignore]
        machine, settings=settings(stateful_step_count=20, max_examples=examples)
    )
