"""GeeeekExplorer/nano-vllm f64d821 (nano-vllm-f64d821): E2 (every KV read finds what that position of that
prefix wrote) at step 5.

Found by schedcheck (`schedcheck engine`), exported as a test that needs only the engine and
pytest: nanovllm's scheduling code and what it imports (run from the checkout's root). Run:
python -m pytest THIS_FILE.

What schedcheck saw: E2 at step 5, model runner: r3 attends to position 0 at slot 2, which
holds position 2 of [1 1 1] (written for r2 at step 3), not position 0 of its own [1]

The requests arrive at the steps written below and run through the engine's own scheduler;
the model is simulated: each step's tokens are read from NEXT, the token schedcheck's model
gave each prefix (a correct engine computes only prefixes listed).
Replaced: its Config, by a namespace of the fields its Scheduler reads (its own loads a
model's config and asserts a block size of 256; the workload's blocks are small so that its
code paths are reached in a few tokens)
Replaced: its model runner and model: the tokens each step's sequences get are read from
NEXT, for the positions its runner computes

Re-run in schedcheck, from a checkout of GeeeekExplorer/nano-vllm at f64d821: schedcheck engine . --loop scheduler --replay E2.json (the workload
written below, saved as JSON)
"""

# The run, as schedcheck saw it:
#   config: num_kvcache_blocks=2 kvcache_block_size=2 max_num_seqs=1 max_num_batched_tokens=1 eos=0 policy=fcfs mode=scheduler
#   requests:
#     r1 prompt [1] max_tokens 2 (step 1)
#     r2 prompt [1, 1, 1] max_tokens 2 (step 1)
#     r3 prompt [1, 1, 1] max_tokens 1 (step 1)
#   model: next token = crc32 of the sequence so far; eos (0) when it is < 2 mod 16, else 1..1
# what happened:
#   step 1: r1 arrives
#   step 1: r2 arrives
#   step 1: r3 arrives
#   step 2: r1 finishes (eos)
#   step 4: r2 finishes (max_tokens)
#   step 5: r3 finishes (max_tokens)

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
MAX_NUM_SEQS = 1
MAX_NUM_BATCHED_TOKENS = 1
MAX_MODEL_LEN = 5
POLICY = 'fcfs'
NEXT = {(1,): 1, (1, 1): 0, (1, 1, 1): 1, (1, 1, 1, 1): 1}
ARRIVALS = {
    1: [('r1', [1], 2, False), ('r2', [1, 1, 1], 2, False), ('r3', [1, 1, 1], 1, False)],
}
LAST = 1  # the last arrival: after it, a step with nothing to run ends the test
STEPS = 57  # every request finishes within these (a generous bound)
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
    start, span = read("num_cached_tokens"), read('num_scheduled_tokens')
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
    prefill computes num_scheduled_tokens tokens from num_cached_tokens (tokens from token_ids); decode computes position len(seq)-1 from last_token, into block_table[-1]."""
    if not is_prefill:
        return tuple(seq.token_ids)
    return tuple(seq.token_ids[: seq.num_cached_tokens + seq.num_scheduled_tokens])


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
        max_num_batched_tokens=1,
        max_num_seqs=1,
        max_model_len=5,
        gpu_memory_utilization=0.9,
        tensor_parallel_size=1,
        enforce_eager=False,
        hf_config=None,
        eos=0,
        kvcache_block_size=2,
        num_kvcache_blocks=2,
    )
    Sequence.block_size = 2  # as its LLMEngine sets it
    return Scheduler(config)


def add(engine, name, prompt, max_tokens, ignore_eos, priority=0, stop=()):
    seq = Sequence(list(prompt), SamplingParams(temperature=1.0, max_tokens=max_tokens, ignore_eos=ignore_eos))
    engine.add(seq)
    return seq


def step(engine, requests, n, seen):
    seqs, is_prefill = engine.schedule()[:2]
    LATEST[:] = [seqs, is_prefill]
    if seen:
        seen("schedule()")
    tokens = [NEXT[computed(seq, is_prefill)] for seq in seqs]
    # postprocess(seqs, token_ids), or (..., is_prefill) in later commits: read at run time,
    # so that the test runs on the commit that has the bug and on the one that fixed it
    takes = len(inspect.signature(engine.postprocess).parameters)
    engine.postprocess(seqs, tokens, *((is_prefill,) if takes >= 3 else ()))


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


def kv_problem(state, kv):
    """What is wrong with the KV the step just scheduled reads (None: nothing). `kv` is the
    cache as the model fills it, kept across steps: (block, slot) -> the tokens whose last
    one's KV the slot holds. The step writes its requests' positions; each position it
    computes reads, at every position of its own up to it, that prefix's KV; and every
    block the prefix cache holds (state["hashed"]: block -> the prefix its hash names)
    holds that prefix's KV, which a request with that prefix would read."""
    def holding(slot):
        found = kv.get(slot)
        return "nothing" if found is None else f"position {len(found) - 1} of {list(found)}"

    scheduled = state["scheduled"]
    for start, count, _, blocks, _, tokens in scheduled.values():
        for p in range(start, min(start + count, len(tokens))):
            if p // BLOCK_SIZE < len(blocks):
                kv[(blocks[p // BLOCK_SIZE], p % BLOCK_SIZE)] = tuple(tokens[: p + 1])
    for name, (start, count, _, blocks, _, tokens) in scheduled.items():
        for q in range(min(start + count, len(tokens))):
            if q // BLOCK_SIZE >= len(blocks):
                return f"{name} attends to position {q}, outside its block table {blocks}"
            slot = (blocks[q // BLOCK_SIZE], q % BLOCK_SIZE)
            if kv.get(slot) != tuple(tokens[: q + 1]):
                return (f"{name} attends to position {q} in block {slot[0]} (slot {slot[1]}), "
                        f"which holds {holding(slot)}, not position {q} of its own "
                        f"{list(tokens[: q + 1])}")
    for block, prefix in sorted(state["hashed"].items()):
        for j in range(BLOCK_SIZE):
            p = len(prefix) - BLOCK_SIZE + j
            if p >= 0 and kv.get((block, j)) != tuple(prefix[: p + 1]):
                return (f"block {block} is in the prefix cache as the prefix {list(prefix)}, "
                        f"but its slot {j} holds {holding((block, j))}, not position {p} of "
                        "that prefix: a request with this prefix would read it")
    return None


class Hung(Exception):
    """A call into the engine that did not return."""


def hung(signum, frame):
    raise Hung(f"a step did not return within {STEP_SECONDS} s")


def test_every_kv_read_finds_what_that_position_of_that_prefix_wrote():
    """Every KV read finds what that position of that prefix wrote (schedcheck's E2)."""
    engine, requests = build(), {}
    states, before = [], None  # the states read; the last one of the step before
    kv = {}  # (block, slot) -> the tokens whose last one's KV it holds, as the model left it

    def seen(call):
        """After a call the property reads: the scheduler's state, checked."""
        now = state(engine, requests)
        found = kv_problem(now, kv) if call == "schedule()" else None
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
