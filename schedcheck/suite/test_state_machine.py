"""A stateful test: Hypothesis interleaves arrivals, steps and stray update() calls at will,
and every invariant is checked on every call's result, on the implementation under test."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from schedcheck.drive.driver import Script
from schedcheck.drive.impl import Implementation
from schedcheck.faults import CheckFailed, rank
from schedcheck.invariants.checks import check_trace
from schedcheck.model.tokens import TokenModel
from schedcheck.model.workload import Config, Request, Workload
from schedcheck.strategies.workloads import MAX_TOKENS, NAMINGS, configs, prompt_lens
from schedcheck.suite.holds import found, give_way, tick
from schedcheck.verdict.report import failure_report

EVERY_CALL = ("C1", "I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "A1", "F1", "D1")


class SchedulerMachine(RuleBasedStateMachine):
    """The rules write a script of calls; the teardown plays it in one go (one command to an
    isolated worker per run, not one per call) and checks every call's result, earliest
    first, as a check after every rule would: a rule's choice never depends on what the
    implementation returned, so playing later changes no run."""

    impl: Implementation  # set by the test: the implementation under test

    @initialize(config=configs(), seed=st.integers(0, 2**16), eos=st.sampled_from([0, 300]),
                naming=st.sampled_from([name for _, name in NAMINGS]))  # fmt: skip
    def start(self, config: Config, seed: int, eos: int, naming: Callable[[int], str]) -> None:
        give_way()
        self.config = config
        self.naming = naming  # seq_ids whose sorted order need not be arrival order
        self.model = TokenModel(seed=seed, eos_per_mille=eos)
        self.requests: list[Request] = []
        self.script: Script = []
        self.steps = 0  # schedule()/update() pairs so far
        self.again = False  # update() again since the last step

    @rule(data=st.data())
    def add_request(self, data: st.DataObject) -> None:
        capacity = self.config.num_blocks * self.config.block_size
        max_tokens = data.draw(st.integers(1, min(MAX_TOKENS, capacity)), label="max_tokens")
        most = min(24, capacity - max_tokens + 1)
        prompt_len = data.draw(prompt_lens(self.config.block_size, most), label="prompt_len")
        name = self.naming(len(self.requests) + 1)
        self.requests.append(Request(name, prompt_len, max_tokens, self.steps + 1))
        self.script.append(["add", name])

    @rule()
    def step(self) -> None:
        self.steps += 1
        self.again = False
        self.script.append(["step"])

    @precondition(
        lambda self: (
            self.steps and not self.again and not any(r.arrival > self.steps for r in self.requests)
        )
    )
    @rule()
    def update_again(self) -> None:
        """update() with no schedule() since the last one: returns [] and changes nothing.

        Only right after a step's update(): a request added in between belongs to the next
        step, and a driver step never adds between update() and update() again.
        """
        self.again = True
        self.script.append(["again"])

    def teardown(self) -> None:
        """Play the script, then run to the end: every call's result holds every invariant,
        every request finishes (L1) with the model's output (D1)."""
        if not hasattr(self, "script"):
            return
        workload = Workload(self.config, tuple(self.requests), self.model)
        trace = self.impl.play(workload, [*self.script, ["finish"]])
        violations = check_trace(trace, only=(*EVERY_CALL, "L1"))
        tick()
        if violations:
            found()
            report = "\n" + failure_report(violations[0], trace)
            raise CheckFailed(violations[0].check, report, rank(violations[0], trace.workload))


SHARDS = 4  # the stateful runs in quarters: under xdist, idle cores take the next one


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
