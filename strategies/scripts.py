"""Scripts for the stateful stage: up to 20 calls in any order the contract allows, where a
driver run always adds at a step's start and calls `update()` once per `schedule()`.

A script (schedcheck/drive/driver.py's `play`) adds a request between any two steps, steps
with nothing to do, and calls `update()` again with no `schedule()` in between; its
workload holds the requests it adds, each arriving at the step after it was added. Drawn
as one list of calls, a counterexample shrinks by deleting calls, as a state machine's
would by deleting rules, at a fraction of a state machine's cost per run (issue 27).
"""

from __future__ import annotations

import functools

from hypothesis import strategies as st

from schedcheck.model.tokens import TokenModel
from schedcheck.model.workload import Config, Request, Script, Workload
from schedcheck.strategies.workloads import MAX_TOKENS, NAMINGS, configs, prompt_lens

MAX_CALLS = 20  # short runs: the bugs live in a few steps, and short runs shrink fast
MAX_PROMPT = 24
_NAMINGS = st.sampled_from([name for _, name in NAMINGS])
_SEEDS = st.integers(0, 2**16)
_EOS_RATES = st.sampled_from([0, 300])


@functools.cache
def _calls(capacity: int, block_size: int) -> st.SearchStrategy[str | tuple[int, int]]:
    """One call: "step", "again", or an add's (prompt_len, max_tokens), each as likely."""

    @st.composite
    def add(draw: st.DrawFn) -> tuple[int, int]:
        max_tokens = draw(st.integers(1, min(MAX_TOKENS, capacity)))
        most = min(MAX_PROMPT, capacity - max_tokens + 1)
        return draw(prompt_lens(block_size, most)), max_tokens

    return st.one_of(add(), st.just("step"), st.just("again"))


@st.composite
def scripts(draw: st.DrawFn) -> tuple[Workload, Script]:
    """A workload (config, token model, the requests the script adds) and its script.

    An "again" the contract does not allow there (before any step, after another "again",
    or with a request added since the last step: a driver never adds between `update()`
    and `update()` again) is left out, so every script is valid and deleting any call
    keeps it so."""
    config: Config = draw(configs())
    model = TokenModel(seed=draw(_SEEDS), eos_per_mille=draw(_EOS_RATES))
    naming = draw(_NAMINGS)  # seq_ids whose sorted order need not be arrival order
    calls = draw(
        st.lists(
            _calls(config.num_blocks * config.block_size, config.block_size), max_size=MAX_CALLS
        )
    )
    requests: list[Request] = []
    script: Script = []
    steps, again = 0, True  # no "again" before the first step
    for call in calls:
        if isinstance(call, tuple):
            prompt_len, max_tokens = call
            name = naming(len(requests) + 1)
            requests.append(Request(name, prompt_len, max_tokens, steps + 1))
            script.append(["add", name])
        elif call == "step":
            steps, again = steps + 1, False
            script.append(["step"])
        elif not again and not any(r.arrival > steps for r in requests):  # "again"
            again = True
            script.append(["again"])
    return Workload(config, tuple(requests), model), script
