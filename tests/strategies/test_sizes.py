"""What the workloads vary past the small scale (issue 38): eos ids and tokens outside
CPython's small-int cache in the ordinary workloads; engine-sized configs, long outputs and
long runs in the larger stage's. Every workload is feasible, as the suite promises."""

from __future__ import annotations

from schedcheck.invariants.evidence import SMALL_INTS
from schedcheck.strategies.large import big, long
from schedcheck.strategies.workloads import fixed_sample


def test_ordinary_workloads_draw_eos_ids_and_vocabularies_past_256() -> None:
    sample = fixed_sample(300)
    eos = [w.config.eos_token_id for w in sample if w.config.eos_token_id is not None]
    large = [e for e in eos if e not in SMALL_INTS]
    assert len(large) >= 0.1 * len(sample), len(large)
    assert 0 in eos and any(1 <= e <= 100 for e in eos)  # the small ones stay
    assert {w.model.vocab_size for w in sample} >= {100, 32_000, 151_936}
    assert any(w.omit_defaults and w.config.eos_token_id is None for w in sample)


def test_big_workloads_reach_engine_sizes_and_stay_feasible() -> None:
    sample = fixed_sample(40, big())
    assert all(not w.infeasible() for w in sample)
    assert any(r.max_tokens > 256 for w in sample for r in w.requests)
    assert any(r.prompt_len >= 500 for w in sample for r in w.requests)
    assert min(w.config.block_size for w in sample) >= 9
    assert max(w.config.max_num_batched_tokens for w in sample) >= 4096


def test_long_runs_finish_a_hundred_requests_and_stay_feasible() -> None:
    sample = fixed_sample(40, long())
    assert all(not w.infeasible() for w in sample)
    assert max(len(w.requests) for w in sample) >= 90
    assert max(w.last_arrival() for w in sample) >= 200
    for w in sample:  # distinct names, listed in arrival order (Workload checks both)
        assert len({r.seq_id for r in w.requests}) == len(w.requests)
