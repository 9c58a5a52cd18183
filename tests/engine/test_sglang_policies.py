"""The scheduling policies SGLang's adapter draws, narrowed to those a release has, read
off its own `schedule_policy.py` (no SGLang needed: files written here)."""

from __future__ import annotations

import argparse
from pathlib import Path

from schedcheck.engine.adapter import EngineSetup
from schedcheck.engine.sglang.adapter import ADAPTER as SGLANG
from schedcheck.engine.sglang.config import ADAPTER_POLICIES, policies_of, sglang_setup
from schedcheck.engine.workload import POLICIES

OLD = """class CacheAwarePolicy(Enum):
    LPM = "lpm"  # longest prefix match
    DFS_WEIGHT = "dfs-weight"  # depth-first search weighting

class CacheAgnosticPolicy(Enum):
    FCFS = "fcfs"  # first come first serve
    LOF = "lof"  # longest output first
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
    assert policies_of(root / "sglang") == ("lpm", "dfs-weight", "fcfs", "lof")
    setup = sglang_setup(str(root), argparse.Namespace(loop=None, modes=None))
    assert setup.lacks_policies == ("hrrn", "shortest-prefill-first")
    assert setup.features(SGLANG.features).policies == ("lpm", "dfs-weight", "lof")
    assert EngineSetup.from_dict(setup.to_dict()) == setup


def test_a_release_with_them_draws_every_one_the_core_knows(tmp_path: Path) -> None:
    newer = OLD + '    HRRN = "hrrn"\n    SHORTEST_PREFILL_FIRST = "shortest-prefill-first"\n'
    setup = sglang_setup(str(release(tmp_path, newer)), argparse.Namespace(loop=None, modes=None))
    assert setup.lacks_policies == ()
    assert setup.features(SGLANG.features).policies == ADAPTER_POLICIES
    assert set(ADAPTER_POLICIES) <= set(POLICIES)
