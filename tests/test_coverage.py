"""The strategies reach every behaviour the spec describes, each in at least 5% of workloads."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, Phase, given, settings

from invariants.workload import Workload
from strategies.coverage import LABELS, observe
from strategies.workloads import any_workloads

WORKLOADS = 500
SHARE = 0.05


def test_each_behaviour_occurs_in_at_least_5_percent_of_500_workloads() -> None:
    seen: list[set[str]] = []

    @settings(
        max_examples=WORKLOADS,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(any_workloads())
    def collect(workload: Workload) -> None:
        seen.append(observe(workload))

    collect()
    assert len(seen) == WORKLOADS
    counts = Counter(label for labels in seen for label in labels)
    rare = {
        label: counts[label] / WORKLOADS for label in LABELS if counts[label] < SHARE * WORKLOADS
    }
    assert not rare, f"behaviours reached in under {SHARE:.0%} of workloads: {rare}"
