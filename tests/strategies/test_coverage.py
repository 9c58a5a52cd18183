"""The strategies reach every behaviour the spec describes, each in at least 5% of workloads."""

from __future__ import annotations

from collections import Counter

from schedcheck.strategies.coverage import LABELS, observe
from schedcheck.strategies.workloads import fixed_sample

WORKLOADS = 500
SHARE = 0.05


def test_each_behaviour_occurs_in_at_least_5_percent_of_500_workloads() -> None:
    seen = [observe(workload) for workload in fixed_sample(WORKLOADS)]
    assert len(seen) == WORKLOADS
    counts = Counter(label for labels in seen for label in labels)
    rare = {
        label: counts[label] / WORKLOADS for label in LABELS if counts[label] < SHARE * WORKLOADS
    }
    assert not rare, f"behaviours reached in under {SHARE:.0%} of workloads: {rare}"
