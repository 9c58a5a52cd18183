"""Hypothesis strategies for feasible workloads, with the spec's edges weighted in.

Every workload is feasible by construction: each request can finish alone,
ceil((prompt_len + max_tokens - 1) / block_size) <= num_blocks. Every draw shrinks toward
fewer requests, shorter prompts, fewer tokens, earlier arrivals and smaller configs, so a
counterexample reads like one of the spec's worked examples.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from schedcheck.model.tokens import TokenModel
from schedcheck.model.workload import Config, Request, Workload

MAX_REQUESTS = 8
MAX_PROMPT = 24
MAX_TOKENS = 8
MAX_ARRIVAL_GAP = 4


@st.composite
def configs(draw: st.DrawFn) -> Config:
    """Budgets from the tightest (1 block of 1 token, budget 1, one slot) to roomy."""
    return Config(
        num_blocks=draw(_ints(1, 16)),
        block_size=draw(_ints(1, 8)),
        max_num_seqs=draw(_ints(1, 6)),
        max_num_batched_tokens=draw(_ints(1, 32)),
        eos_token_id=draw(EOS_IDS),
    )


# Strategies built once and reused: building one per draw costs more than the draw.
_GAPS = st.one_of(st.just(0), st.integers(0, MAX_ARRIVAL_GAP))
# eos ids past CPython's small-int cache (-5..256) too, as real vocabularies have them
# (50256, 128001, 151643): only there is an eos the driver hands over equal to
# eos_token_id without being the same object, and `tok is eos_token_id` wrong (issue 38).
# A failure that needs a large id shrinks to 257, one that does not to the small ones.
EOS_IDS = st.one_of(st.none(), st.just(0), st.integers(1, 100), st.integers(257, 200_000))
# The token model's vocabulary: ordinary tokens from 0..vocab_size; shrinks to 100.
_VOCABS = st.sampled_from([100, 32_000, 151_936])
_STORM_EOS = st.one_of(st.none(), st.just(0), st.integers(257, 200_000))
_EOS_RATES = st.sampled_from([0, 20, 300, 1000])
_SEEDS = st.integers(0, 2**16)
_BOOLEANS = st.booleans()
# A budget smaller than a victim's recompute lets it back in, chunked, in the same step.
_SMALL_BUDGETS = st.one_of(st.integers(1, 3), st.integers(1, 8))


@functools.cache
def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)


@functools.cache
def prompt_lens(block_size: int, most: int) -> st.SearchStrategy[int]:
    """Any length up to `most`, with block boundaries (k*bs - 1, k*bs, k*bs + 1) and the
    feasibility edge itself drawn often."""
    edges = sorted(
        {k * block_size + d for k in range(1, most // block_size + 2) for d in (-1, 0, 1)} | {most}
    )
    edges = [p for p in edges if 1 <= p <= most]
    return st.one_of(st.integers(1, most), st.sampled_from(edges))


# The contract says only that a seq_id is a string. Named a1, a2, ... in arrival order,
# every workload would let code that sorts, compares or keys by seq_id pass as if it
# followed arrival order (issue 27). So each workload names its requests by one of these
# schemes, and each request draws an offset of its own: the k-th to arrive is named
# scheme(k + 10 * offset), distinct for any offsets since k <= MAX_REQUESTS < 10. Drawn
# per request, a name is deleted with its request when shrinking, which goes to a1, a2, ...
# Each scheme maps k = 1, 2, ... to distinct names (up to k = 90 at least); workloads of
# more requests space the offsets wider and leave out the scheme that stops at 'a'.
NAMINGS: tuple[tuple[str, Callable[[int], str]], ...] = (
    ("a<k>", lambda k: f"a{k}"),
    ("numeric", lambda k: str(k + 7)),  # 8, 9, 10, 11: '10' sorts before '8'
    ("reverse", lambda k: chr(ord("z") - k)),  # y, x, w: sorted is arrival reversed
    ("lengths", lambda k: "n" * (k % 5) + str(k)),  # n1, nn2, nnn3, nnnn4, 5: '5' first
    ("non-ascii", lambda k: "éaΩbßcжd"[(k - 1) % 8] + str(k)),  # beyond ASCII among ASCII
)
REVERSED = NAMINGS[2][1]  # the exhaustive scopes' names: no state added, sorted reversed
_NAMINGS = st.sampled_from([name for _, name in NAMINGS])
# The schemes that name any number of requests (reverse letters stop at 'a').
_SCALING_NAMINGS = st.sampled_from([name for _, name in NAMINGS if name is not REVERSED])
_OFFSETS = st.integers(0, MAX_REQUESTS)
_KEYS = st.integers(0, 2**16)  # a request's own token stream (TokenModel.keys)


@functools.cache
def _request(
    capacity: int, block_size: int, max_prompt: int, longest: int = MAX_TOKENS
) -> st.SearchStrategy[tuple[int, int, int, int, int, int | None]]:
    """One request's draws, all of them (so that shrinking deletes a request whole): its
    name's offset, max_tokens (up to `longest`), prompt_len, arrival gap, token key and
    forced eos."""
    # A request's forced eos: none (two times in three) or at one position of its output.
    eos_positions = st.one_of(st.none(), st.none(), _ints(0, longest - 1))

    @st.composite
    def one(draw: st.DrawFn) -> tuple[int, int, int, int, int, int | None]:
        offset = draw(_OFFSETS)
        max_tokens = draw(_ints(1, min(longest, capacity)))
        most = min(max_prompt, capacity - max_tokens + 1)
        prompt_len = draw(prompt_lens(block_size, most))
        gap, key, eos = draw(_GAPS), draw(_KEYS), draw(eos_positions)
        return offset, max_tokens, prompt_len, gap, key, eos

    return one()


@st.composite
def requests(
    draw: st.DrawFn,
    config: Config,
    min_count: int,
    max_count: int,
    max_prompt: int = MAX_PROMPT,
    longest: int = MAX_TOKENS,
) -> tuple[tuple[Request, ...], TokenModel]:
    """Feasible requests in arrival order (each fits the pool alone), named by a scheme of
    NAMINGS (their sorted order need not be arrival order), most arriving at step 1; and
    the token model, whose per-request keys and forced eos are drawn with each request."""
    capacity = config.num_blocks * config.block_size  # the most KV tokens one may hold
    one = _request(capacity, config.block_size, max_prompt, longest)
    parts = [draw(one) for _ in range(draw(_ints(min_count, max_count)))]
    naming = draw(_NAMINGS if max_count <= MAX_REQUESTS else _SCALING_NAMINGS)
    spacing = 10 ** len(str(max_count))  # k + spacing * offset: distinct for any offsets
    out, keys, eos_at = [], [], []
    arrival = 1
    for k, (offset, max_tokens, prompt_len, gap, key, eos) in enumerate(parts, start=1):
        name = naming(k + spacing * offset)
        arrival += gap
        out.append(Request(name, prompt_len, max_tokens, arrival))
        keys.append((name, key))
        if eos is not None:
            eos_at.append((name, eos))
    model = TokenModel(
        seed=draw(_SEEDS),
        vocab_size=draw(_VOCABS),
        eos_per_mille=draw(_EOS_RATES),
        eos_at=tuple(sorted(eos_at)),
        keys=tuple(keys),
    )
    return tuple(out), model


@st.composite
def workloads(draw: st.DrawFn, min_requests: int = 1, max_requests: int = MAX_REQUESTS) -> Workload:
    """A feasible workload: a config, requests that fit it, and a token model."""
    config = draw(configs())
    reqs, model = draw(requests(config, min_requests, max_requests))
    return Workload(config, reqs, model, reupdate=draw(_BOOLEANS), omit_defaults=draw(_BOOLEANS))


@st.composite
def storms(draw: st.DrawFn) -> Workload:
    """Many short requests on few small blocks: every decode needs a new block, so
    sequences are preempted again and again, and often re-admitted in the same step."""
    config = Config(
        num_blocks=draw(_ints(2, 6)),
        block_size=draw(_ints(1, 2)),
        max_num_seqs=draw(_ints(2, 6)),
        max_num_batched_tokens=draw(_SMALL_BUDGETS),
        eos_token_id=draw(_STORM_EOS),
    )
    reqs, model = draw(requests(config, 3, MAX_REQUESTS, max_prompt=3))
    return Workload(config, reqs, model, omit_defaults=draw(_BOOLEANS))


def any_workloads() -> st.SearchStrategy[Workload]:
    """What the property suite tries: a third ordinary workloads, two thirds storms.

    Storms carry the rare behaviours (a sequence preempted twice, a victim re-admitted in
    the same step); shrinking still moves toward an ordinary workload.
    """
    return _ANY


def pairs() -> st.SearchStrategy[tuple[Workload, Workload]]:
    """Two workloads of different configurations (block size, pool, budgets or eos: a
    submission that keeps one of them at module or class level is right for one scheduler
    and wrong for two), for two schedulers alive at once (issue 47). Each shrinks as a
    workload of the properties does."""
    return _PAIRS


def fixed_sample(size: int, strategy: st.SearchStrategy[Workload] | None = None) -> list[Workload]:
    """The same `size` workloads of `strategy` (by default `any_workloads`) on every call, on
    every machine (derandomized draws)."""
    found: list[Workload] = []

    @settings(
        max_examples=size,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(any_workloads() if strategy is None else strategy)
    def collect(workload: Workload) -> None:
        found.append(workload)

    collect()
    return found


_ORDINARY, _STORMS = workloads(), storms()
_ANY = st.integers(0, 2).flatmap(lambda k: _ORDINARY if k == 0 else _STORMS)
_PAIRS = st.tuples(_ANY, _ANY).filter(lambda pair: pair[0].config != pair[1].config)
