"""Short builders that keep the tests readable, in the style of vLLM's test utils."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from schedcheck.drive.driver import run
from schedcheck.drive.loader import load_impl
from schedcheck.model.trace import State, Step, Trace
from schedcheck.model.workload import Workload
from schedcheck.strategies.examples import SPEC_MODEL

ROOT = Path(__file__).parent.parent


def rotation_day() -> int:
    """Which share of a costly self-check the default run takes: today's, so that the
    shares rotate day by day; SCHEDCHECK_ROTATION=N reproduces the run of day N."""
    return int(os.environ.get("SCHEDCHECK_ROTATION") or datetime.date.today().toordinal())


def run_pytest(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A separate pytest process on this project's tests (paths relative to ROOT), so
    that profiles, databases and plugins start from nothing, as on another machine."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def spec_sample_fn(seq: Any) -> int:
    """The worked examples' model: `100 * i + len(seq.output)` for sequence `a<i>`."""
    return SPEC_MODEL.next_token(seq.seq_id, tuple(seq.output), None)


def create_scheduler(impl: ModuleType, **overrides: Any) -> Any:
    """A scheduler of `impl` with roomy defaults; keyword arguments override them."""
    kwargs: dict[str, Any] = dict(
        num_blocks=100,
        block_size=4,
        max_num_seqs=8,
        max_num_batched_tokens=64,
        sample_fn=spec_sample_fn,
    )
    kwargs.update(overrides)
    return impl.Scheduler(**kwargs)


def create_requests(impl: ModuleType, sched: Any, *specs: tuple[str, int, int]) -> dict[str, Any]:
    """Add `(seq_id, prompt_len, max_tokens)` requests in order; return them by id."""
    seqs = {}
    for seq_id, prompt_len, max_tokens in specs:
        seq = impl.Sequence(seq_id=seq_id, prompt_len=prompt_len, max_tokens=max_tokens)
        sched.add(seq)
        seqs[seq_id] = seq
    return seqs


def ids(seqs: Any) -> list[str]:
    """The seq_ids of a queue or of what update() returned, in order."""
    return [seq.seq_id for seq in seqs]


def reference_trace(workload: Workload) -> Trace:
    """What the reference does with `workload`: the baseline that tampering breaks."""
    return run(load_impl(), workload)


def tamper(trace: Trace, step: int, call: str, seq: str | None = None, **fields: Any) -> Trace:
    """`trace` with the state after one call changed: a field of sequence `seq`, or of the state.

    `call` is "schedule()" or "update()"; the rest of the trace is kept as it was.
    """
    old = trace.steps[step - 1]
    if call == "schedule()":
        new = replace(old, scheduled=_changed(old.scheduled, seq, fields))
    else:
        assert old.update is not None
        update = replace(old.update, after=_changed(old.update.after, seq, fields))
        new = replace(old, update=update)
    return replace_step(trace, new)


def replace_step(trace: Trace, step: Step, **fields: Any) -> Trace:
    """`trace` with its step of the same number replaced by `step` (with `fields` changed)."""
    steps = list(trace.steps)
    steps[step.number - 1] = replace(step, **fields)
    return replace(trace, steps=tuple(steps))


def _changed(state: State, seq: str | None, fields: dict[str, Any]) -> State:
    if seq is None:
        return replace(state, **fields)
    return replace(state, seqs={**state.seqs, seq: state.seqs[seq]._replace(**fields)})


def quick(monkeypatch: pytest.MonkeyPatch | None = None) -> dict[str, str]:
    """The environment that gives a mode's pytest run tests/quick_profile.py (add
    `--profile`/`--hypothesis-profile` QUICK_PROFILE to its command line); set in this
    process too with `monkeypatch`, for a mode called in-process (`main([...])`)."""
    env = {"PYTEST_ADDOPTS": "-p tests.quick_profile", "PYTHONPATH": str(ROOT)}
    if monkeypatch is not None:
        for key, value in env.items():
            monkeypatch.setenv(key, value)
    return env


QUICK_PROFILE = "schedcheck-selftest-quick"
