"""The scheduling policies SGLang's adapter draws, narrowed to those a release has, read
off its own `schedule_policy.py` (no SGLang needed: files written here); and retraction by
priority as E14 reads it."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from schedcheck.engine.adapter import EngineSetup
from schedcheck.engine.checks import active, check_engine
from schedcheck.engine.sglang.adapter import ADAPTER as SGLANG
from schedcheck.engine.sglang.config import ADAPTER_POLICIES, policies_of, sglang_setup
from schedcheck.engine.strategies import PREEMPTION, observe
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.workload import POLICIES, EngineRequest, EngineWorkload

CHECKS = active(on=SGLANG.policies_on)

OLD = """class CacheAwarePolicy(Enum):
    LPM = "lpm"  # longest prefix match
    DFS_WEIGHT = "dfs-weight"  # depth-first search weighting

class CacheAgnosticPolicy(Enum):
    FCFS = "fcfs"  # first come first serve
    LOF = "lof"  # longest output first
    RANDOM = "random"
    ROUTING_KEY = "routing-key"  # prioritize by routing key frequency in running batch
"""


def release(tmp_path: Path, policy_file: str) -> Path:
    """A folder shaped as an SGLang release, for its setup to read."""
    root = tmp_path / "python"
    srt = root / "sglang" / "srt"
    (srt / "managers").mkdir(parents=True)
    (srt / "managers" / "scheduler.py").write_text("")
    (srt / "managers" / "schedule_policy.py").write_text(policy_file)
    (srt / "server_args.py").write_text("disable_overlap_schedule: bool = False\n")
    return root


def test_a_release_without_the_newer_policies_draws_the_older_ones_alone(
    tmp_path: Path,
) -> None:
    root = release(tmp_path, OLD)
    assert policies_of(root / "sglang") == (
        "lpm",
        "dfs-weight",
        "fcfs",
        "lof",
        "random",
        "routing-key",
    )
    setup = sglang_setup(str(root), argparse.Namespace(loop=None, modes=None))
    assert setup.lacks_policies == ("hrrn", "shortest-prefill-first")
    assert setup.features(SGLANG.features).policies == (
        "lpm",
        "dfs-weight",
        "lof",
        "random",
        "routing-key",
    )
    assert EngineSetup.from_dict(setup.to_dict()) == setup


def test_a_release_with_them_draws_every_one_the_core_knows(tmp_path: Path) -> None:
    newer = OLD + '    HRRN = "hrrn"\n    SHORTEST_PREFILL_FIRST = "shortest-prefill-first"\n'
    setup = sglang_setup(str(release(tmp_path, newer)), argparse.Namespace(loop=None, modes=None))
    assert setup.lacks_policies == ()
    assert setup.features(SGLANG.features).policies == ADAPTER_POLICIES
    assert set(ADAPTER_POLICIES) <= set(POLICIES)


RETRACTION = Path(__file__).resolve().parent.parent / "engine_subjects" / "sglang"


def test_e14_reads_retraction_by_priority() -> None:
    """A run of SGLang 0.5.23 recorded here (priority_retraction_trace.json): the priority
    policy with `--retraction-policy priority`, no preemption for priority; r1 (priority 2,
    the worst) runs from step 1, r2 (0) and r3 (1) arrive at step 2; when the decodes
    outgrow the pool, r1 is retracted, though r2 has no more output than it: E14 quiet.
    The same run with the priorities swapped (r1 the best) breaks it."""
    trace = EngineTrace.from_dict(
        json.loads((RETRACTION / "priority_retraction_trace.json").read_text())
    )
    w = trace.workload
    assert w.config.retract_by_priority and w.config.policy == "priority"
    assert check_engine(trace, CHECKS) == []
    assert PREEMPTION in observe(trace)
    swapped = {"r1": 0, "r2": 2}
    requests = tuple(replace(r, priority=swapped.get(r.name, r.priority)) for r in w.requests)
    found = check_engine(replace(trace, workload=replace(w, requests=requests)), CHECKS)
    assert [v.check for v in found] == ["E14"] and "the worst priority" in found[0].message
    assert EngineWorkload.from_json(w.to_json()) == w
    plain = replace(w, config=replace(w.config, policy="fcfs"))
    assert any("retract_by_priority under policy 'fcfs'" in p for p in plain.problems(1))


def test_a_routing_key_round_trips_and_a_bad_one_is_named() -> None:
    w = EngineWorkload(
        replace(
            EngineTrace.from_dict(
                json.loads((RETRACTION / "priority_retraction_trace.json").read_text())
            ).workload.config,
            policy="routing-key",
            retract_by_priority=False,
        ),
        (EngineRequest("r1", (1, 2), 2, routing_key="k1"), EngineRequest("r2", (2,), 2)),
    )
    assert EngineWorkload.from_json(w.to_json()) == w and w.problems(smallest_block=1) == []
    bad = replace(w, requests=(replace(w.requests[0], routing_key="k 1"), w.requests[1]))
    assert bad.problems(smallest_block=1) == [
        "r1's routing_key 'k 1' is not a short name of letters and digits"
    ]
