"""laurxh/JK-infra b06f7d3 (src): E1 (positions scheduled stay inside the sequence)
at step 2.

Found by schedcheck (`schedcheck engine`), exported as a test that needs only the engine and
pytest: nanovllm's scheduling code and what it imports (run from the checkout's root). Run:
python -m pytest THIS_FILE.

What schedcheck saw: E1 at step 2, schedule(): r2 is scheduled for positions 0..-1 of a
sequence of 1 tokens (the runner starts at 0 and computes 0)

The requests arrive at the steps written below and run through the engine's own scheduler;
the model is simulated: each step's tokens are read from NEXT, the token schedcheck's model
gave each prefix (a correct engine computes only prefixes listed).
Replaced: its Config, by a namespace of the fields its Scheduler reads (its own loads a
model's config and asserts a block size of 256; the workload's blocks are small so that its
code paths are reached in a few tokens)
Replaced: its model runner and model: the tokens each step's sequences get are read from
NEXT, for the positions its runner computes

Re-run in schedcheck, from a checkout of laurxh/JK-infra at b06f7d3: schedcheck engine src --loop scheduler --replay E1.json (the workload
written below, saved as JSON)
"""

# The run, as schedcheck saw it:
#   config: num_kvcache_blocks=2 kvcache_block_size=2 max_num_seqs=2 max_num_batched_tokens=2 eos=0 policy=fcfs mode=scheduler
#   requests:
#     r1 prompt [1, 1, 1] max_tokens 1 (step 1)
#     r2 prompt [1] max_tokens 1 (step 1)
#     r3 prompt [1] max_tokens 1 (step 1)
#     r4 prompt [1] max_tokens 1 (step 1)
#   model: next token = crc32 of the sequence so far; eos (0) when it is < 2 mod 16, else 1..1
# what happened:
#   step 1: r1 arrives
#   step 1: r2 arrives
#   step 1: r3 arrives
#   step 1: r4 arrives
#   step 2: r1 finishes (max_tokens)
#   step 3: r2 finishes (max_tokens)
#   step 3: r3 finishes (max_tokens)
#   step 4: r4 finishes (max_tokens)

import signal
import inspect
import pickle
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

# nanovllm/__init__.py imports its whole engine (torch, transformers, its kernels);
# the scheduler needs none of it: the package is entered without running it
_package = ModuleType("nanovllm")
_package.__path__ = [str(Path("nanovllm").resolve())]
sys.modules.setdefault("nanovllm", _package)

from nanovllm.engine.scheduler import Scheduler  # noqa: E402
from nanovllm.engine.sequence import Sequence  # noqa: E402
from nanovllm.sampling_params import SamplingParams  # noqa: E402

BLOCK_SIZE = 2
NUM_BLOCKS = 2
MAX_NUM_SEQS = 2
MAX_NUM_BATCHED_TOKENS = 2
MAX_MODEL_LEN = 4
POLICY = 'fcfs'
NEXT = {(): 0, (1,): 1, (1, 1): 0, (1, 1, 1): 1}
ARRIVALS = {
    1: [('r1', [1, 1, 1], 1, False), ('r2', [1], 1, False), ('r3', [1], 1, False), ('r4', [1], 1, False)],
}
LAST = 1  # the last arrival: after it, a step with nothing to run ends the test
STEPS = 59  # every request finishes within these (a generous bound)
STEP_SECONDS = 10  # a step that takes longer hangs (schedcheck's E6)


LATEST = []  # the latest schedule(): its sequences and whether it prefills
PICKLED = True  # its Sequence has a __getstate__ of its own, sent to 2 rank(s)


def worker_view(copy, size):
    """What a tensor-parallel worker reads of its copy: [block table, length, last
    token, the first position and count its runner's fields give, tokens] (None: a
    field its __getstate__ does not send)."""

    def read(field):
        try:
            return getattr(copy, field)
        except Exception:
            return None

    table, tokens = read("block_table"), read("token_ids")
    start, span = read("num_cached_tokens"), read('num_new_tokens')
    first = count = None
    if start is not None and span is not None:
        first = int(start)
        span = None if span is None else int(span)
        count = (span or 0)
    size_sent, last = read("num_tokens"), read("last_token")
    return [
        None if table is None else [int(b) for b in table],
        None if size_sent is None else int(size_sent),
        None if last is None else int(last),
        first,
        count,
        None if tokens is None else [int(t) for t in tokens],
    ]


def computed(seq, is_prefill):
    """The tokens whose last position its runner computes this step:
    prefill computes num_new_tokens tokens from num_cached_tokens (tokens from token_ids); no decode step of its own: every scheduled sequence is computed by the same rule, in one mixed batch."""
    if not is_prefill:
        return tuple(seq.token_ids)
    return tuple(seq.token_ids[: seq.num_cached_tokens + seq.num_new_tokens])


def first(seq, is_prefill):
    """The first position its runner computes this step."""
    return seq.num_cached_tokens if is_prefill else len(seq.token_ids) - 1


def cached(manager):
    """Freed blocks kept for their hash apart from the free list."""
    for name in ('cached_block_ids', 'cached_blocks', 'evictable_block_ids'):
        kept = getattr(manager, name, None)
        if kept is not None:
            return sorted(kept.values() if isinstance(kept, dict) else kept)
    return []


def build():
    config = SimpleNamespace(
        max_num_batched_tokens=2,
        max_num_seqs=2,
        max_model_len=4,
        gpu_memory_utilization=0.9,
        tensor_parallel_size=1,
        enforce_eager=False,
        hf_config=None,
        eos=0,
        kvcache_block_size=2,
        num_kvcache_blocks=2,
        chunked_prefill=True,
    )
    Sequence.block_size = 2  # as its LLMEngine sets it
    return Scheduler(config)


def add(engine, name, prompt, max_tokens, ignore_eos, priority=0, stop=()):
    seq = Sequence(list(prompt), SamplingParams(temperature=1.0, max_tokens=max_tokens, ignore_eos=ignore_eos))
    engine.add(seq)
    return seq


def step(engine, requests, n, seen):
    seqs = list(engine.schedule())
    LATEST[:] = [seqs, True]  # each row by the prefill rule
    if seen:
        seen("schedule()")
    ended = [
        i for i, seq in enumerate(seqs) if computed(seq, True) == tuple(seq.token_ids)
    ]
    tokens = [NEXT[tuple(seqs[i].token_ids)] for i in ended]
    engine.postprocess(seqs, tokens, ended)


def done(engine, requests):
    return engine.is_finished()


def state(engine, requests):
    seqs, is_prefill = LATEST or ([], False)
    names = {id(seq): name for name, seq in requests.items()}
    scheduled = {}
    for seq in seqs:
        start, upto = first(seq, is_prefill), len(computed(seq, is_prefill))
        tokens = list(seq.token_ids)
        table = list(seq.block_table)
        scheduled[names[id(seq)]] = [start, upto - start, len(tokens), table, 0, tokens]
    running = [names[id(seq)] for seq in engine.running if id(seq) in names]
    copies = {}
    for seq in seqs if PICKLED else ():  # what its tensor-parallel workers receive
        try:
            copy = pickle.loads(pickle.dumps(seq))
        except Exception as e:
            copies[names[id(seq)]] = repr(e)
            continue
        copies[names[id(seq)]] = worker_view(copy, len(seq.token_ids))
    return {
        "scheduled": scheduled, "running": running, "progress": {}, "hashed": {},
        "prefill": is_prefill, "copies": copies,
    }


def schedule_problem(state):
    """What is wrong with the step just scheduled (None: nothing): each request computes
    positions inside its tokens (those it knows and those in flight, then its drafts, each
    computed in the step) and its block table."""
    for name, (start, count, size, blocks, *drafts) in state["scheduled"].items():
        end = start + count
        if count < 1 or start < 0 or end > size:
            return (f"{name} is scheduled for positions {start}..{end - 1} of a sequence "
                    f"of {size} tokens")
        if drafts and drafts[0] and end != size:  # the last drafts[0] of its tokens
            return (f"{name} is scheduled {drafts[0]} draft token(s), but this step computes "
                    f"positions {start}..{end - 1} of its {size} tokens with them: a draft "
                    "scheduled is computed in its step")
        if len(blocks) * BLOCK_SIZE < end:
            return (f"{name} computes up to position {end - 1}, but its block table "
                    f"{blocks} covers only {len(blocks) * BLOCK_SIZE} positions")
    return None


class Hung(Exception):
    """A call into the engine that did not return."""


def hung(signum, frame):
    raise Hung(f"a step did not return within {STEP_SECONDS} s")


def test_positions_scheduled_stay_inside_the_sequence():
    """Positions scheduled stay inside the sequence (schedcheck's E1)."""
    engine, requests = build(), {}
    states, before = [], None  # the states read; the last one of the step before

    def seen(call):
        """After a call the property reads: the scheduler's state, checked."""
        now = state(engine, requests)
        found = schedule_problem(now) if call == "schedule()" else None
        states.append(now)
        assert found is None, f"step {n}, after {call}: {found}"

    for n in range(1, STEPS + 1):
        for request in ARRIVALS.get(n, []):
            requests[request[0]] = add(engine, *request)
        if done(engine, requests):
            if n >= LAST:
                break
            continue  # nothing to run until the next arrival
        signal.signal(signal.SIGALRM, hung)
        signal.alarm(STEP_SECONDS)
        try:
            step(engine, requests, n, seen)
        finally:
            signal.alarm(0)
