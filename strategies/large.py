"""Larger configurations and longer runs than the ordinary workloads ever reach (issue 38).

The ordinary workloads stay small by design: the exercise's bugs show at small scale and
shrink there. A bug that shows only past a size they never reach does not: a fixed-size
history (`deque(maxlen=...)`), a cap on a count, a token or length compared with `is`
(equal ints outside -5..256 are different objects), a block table of fixed length, a
budget or block size written as a constant. Two shapes, each feasible by construction:

- `big`: blocks of 16 tokens and more, pools of hundreds to thousands of blocks, budgets in
  the thousands, up to hundreds of running slots, prompts of hundreds of tokens and outputs
  past 256 tokens;
- `long`: up to 100 short requests arriving over hundreds of steps on a small pool, so
  that a hundred finish and hundreds of preemptions happen in one run;
- `marathon`: a thousand and more short requests arriving in small bursts over more than
  2^16 steps on a pool that admits a burst's prompts and no more, so that
  thousands finish and thousands are preempted; its states are copied whole every
  MARATHON_SAMPLE steps and at the end, the counters at every call (Workload.sample_every).

They shrink as the ordinary ones do: toward fewer requests, shorter prompts, smaller
configs, so a counterexample keeps only the size its bug needs.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from schedcheck.model.workload import Config, Workload
from schedcheck.strategies.workloads import EOS_IDS, requests

__all__ = ["MARATHON_REQUESTS", "MARATHON_STEPS", "big", "long", "marathon"]

BIG_REQUESTS = 10
BIG_PROMPT = 1_000
BIG_OUTPUT = 300  # past 256: a length compared with `is` fails there
LONG_REQUESTS = 100
# A marathon (issue 47): past the round caps a history or a counter may carry (a thousand
# finished, a thousand preempted, a 16-bit step counter), in one run.
MARATHON_REQUESTS = (1_100, 3_000)
MARATHON_STEPS = (1 << 16) + 2_000
MARATHON_SAMPLE = 4096  # the whole state copied every this many steps (and at the end)

_BIG_BLOCK_SIZES = st.one_of(st.sampled_from([16, 32]), st.integers(9, 128))
_BOOLEANS = st.booleans()
_RARE_EOS = st.sampled_from([0, 2, 10])


@st.composite
def big(draw: st.DrawFn) -> Workload:
    """A few requests on the scale of a real engine's configuration."""
    config = Config(
        num_blocks=draw(st.integers(64, 4_096)),
        block_size=draw(_BIG_BLOCK_SIZES),
        max_num_seqs=draw(st.integers(1, 512)),
        max_num_batched_tokens=draw(st.integers(256, 16_384)),
        eos_token_id=draw(EOS_IDS),
    )
    reqs, model = draw(requests(config, 1, BIG_REQUESTS, BIG_PROMPT, BIG_OUTPUT))
    # Long outputs need rare eos: at the ordinary rates most would end in a few tokens.
    model = replace(model, eos_per_mille=draw(_RARE_EOS))
    return Workload(config, reqs, model, draw(_BOOLEANS), draw(_BOOLEANS))


@st.composite
def long(draw: st.DrawFn) -> Workload:
    """Many short requests over many steps on a small pool: a pattern of a few ordinary
    requests, repeated up to LONG_REQUESTS in all, each repeat some steps after the last.
    Drawn as a pattern and a count, a counterexample shrinks in a few dozen runs (a
    hundred requests drawn one by one would take thousands)."""
    config = Config(
        num_blocks=draw(st.integers(2, 12)),
        block_size=draw(st.integers(1, 4)),
        max_num_seqs=draw(st.integers(2, 8)),
        max_num_batched_tokens=draw(st.integers(1, 16)),
        eos_token_id=draw(EOS_IDS),
    )
    pattern, model = draw(requests(config, 1, 3, max_prompt=6))
    repeats = draw(st.integers(1, LONG_REQUESTS // len(pattern)))
    every = draw(st.integers(0, 8))  # steps between two repeats
    keys, eos_at = dict(model.keys), dict(model.eos_at)
    out, more_keys, more_eos = [], [], []
    for r in range(repeats):
        for request in pattern:
            name = request.seq_id if r == 0 else f"{request.seq_id}.{r}"
            out.append(replace(request, seq_id=name, arrival=request.arrival + r * every))
            more_keys.append((name, keys[request.seq_id] + r))
            if request.seq_id in eos_at:
                more_eos.append((name, eos_at[request.seq_id]))
    model = replace(model, keys=tuple(more_keys), eos_at=tuple(sorted(more_eos)))
    ordered = tuple(sorted(out, key=lambda q: q.arrival))  # stable: a repeat's own order
    return Workload(config, ordered, model, omit_defaults=draw(_BOOLEANS))


@st.composite
def marathon(draw: st.DrawFn) -> Workload:
    """A burst of three short requests, repeated past MARATHON_REQUESTS[0] requests
    and MARATHON_STEPS steps, on a pool that admits the burst's prompts together and no
    more: as they grow they preempt each other. Shrinks toward the fewest requests
    and steps that still pass every cap, and the smallest burst."""
    block_size = draw(st.integers(1, 2))
    config = Config(
        num_blocks=4,  # room to draw the burst; then its prompts' together
        block_size=block_size,
        max_num_seqs=3,  # the whole burst runs at once
        max_num_batched_tokens=draw(st.integers(3, 6)),
        eos_token_id=None,  # no early end: each grows to its max_tokens
    )
    pattern, model = draw(requests(config, 3, 3, max_prompt=3, longest=3))
    # each grows two blocks past its prompt's: the burst's growth takes blocks the others hold
    grow = 2 * block_size + 1
    pattern = tuple(replace(r, max_tokens=max(r.max_tokens, grow)) for r in pattern)
    model = replace(model, eos_at=())
    # every prompt of the burst admitted at once, no more: their outputs' blocks are
    # taken from each other (a preemption a burst), and the largest still fits alone
    prompts = sum(-(-r.prompt_len // block_size) for r in pattern)
    need = max(r.peak_blocks(block_size) for r in pattern)
    config = replace(config, num_blocks=max(need, prompts))
    low, high = MARATHON_REQUESTS
    repeats = draw(st.integers(-(-low // len(pattern)), high // len(pattern)))
    every = -(-MARATHON_STEPS // repeats) + draw(st.integers(0, 4))
    keys, eos_at = dict(model.keys), dict(model.eos_at)
    out, more_keys, more_eos = [], [], []
    for r in range(repeats):
        for request in pattern:
            name = request.seq_id if r == 0 else f"{request.seq_id}.{r}"
            out.append(replace(request, seq_id=name, arrival=1 + r * every))
            more_keys.append((name, keys[request.seq_id] + r))
            if request.seq_id in eos_at:
                more_eos.append((name, eos_at[request.seq_id]))
    model = replace(model, keys=tuple(more_keys), eos_at=tuple(sorted(more_eos)))
    return Workload(config, tuple(out), model, sample_every=MARATHON_SAMPLE)
