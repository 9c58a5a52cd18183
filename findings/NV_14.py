"""tang-jiapeng/nano-vllm-v1 a180672 (nanovllm): E3 (the block pool adds up) at step 4.

Found by schedcheck (`schedcheck engine`), exported as a test that needs only the engine and
pytest: nanovllm's scheduling code and what it imports (run from the checkout's root). Run:
python -m pytest THIS_FILE.

What schedcheck saw: E3 at step 4, postprocess(): block 0 is neither free, cached nor used
(or is no block at all)

The requests arrive at the steps written below and run through the engine's own scheduler;
the model is simulated: each step's tokens are read from NEXT, the token schedcheck's model
gave each prefix (a correct engine computes only prefixes listed).
Replaced: its Config, by a namespace of the fields its Scheduler reads (its own loads a
model's config and asserts a block size of 256; the workload's blocks are small so that its
code paths are reached in a few tokens)
Replaced: its model runner and model: the tokens each step's sequences get are read from
NEXT, for the positions its runner computes

Re-run in schedcheck, from a checkout of tang-jiapeng/nano-vllm-v1 at a180672: schedcheck engine . --loop scheduler --replay E3.json (the workload
above, saved as JSON)
"""

# The run, as schedcheck saw it:
#   config: num_kvcache_blocks=2 kvcache_block_size=2 max_num_seqs=1 max_num_batched_tokens=3 eos=0 policy=fcfs mode=scheduler
#   requests:
#     r1 prompt [1] max_tokens 2 (step 1)
#     r2 prompt [1] max_tokens 2 (step 1)
#   model: next token = crc32 of the sequence so far; eos (0) when it is < 2 mod 16, else 1..1
# what happened:
#   step 1: r1 arrives
#   step 1: r2 arrives
#   step 2: r1 finishes (eos)
#   step 4: r2 finishes (eos)

import signal
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
MAX_NUM_BATCHED_TOKENS = 3
MAX_MODEL_LEN = 3
POLICY = 'fcfs'
NEXT = {(1,): 1, (1, 1): 0}
ARRIVALS = {1: [('r1', [1], 2, False), ('r2', [1], 2, False)]}
LAST = 1  # the last arrival: after it, a step with nothing to run ends the test
STEPS = 27  # every request finishes within these (a generous bound)
STEP_SECONDS = 10  # a step that takes longer hangs (schedcheck's E6)


def computed(seq, is_prefill):
    """The tokens whose last position its runner computes this step:
    prefill computes num_new_tokens tokens from num_cached_tokens (tokens from token_ids); no decode step of its own: every scheduled sequence is computed by the same rule, in one mixed batch."""
    if not is_prefill:
        return tuple(seq.token_ids)
    return tuple(seq.token_ids[: seq.num_cached_tokens + seq.num_new_tokens])


def cached(manager):
    """Freed blocks kept for their hash apart from the free list."""
    for name in ('cached_block_ids', 'cached_blocks', 'evictable_block_ids'):
        kept = getattr(manager, name, None)
        if kept is not None:
            return sorted(kept.values() if isinstance(kept, dict) else kept)
    return []


def build():
    config = SimpleNamespace(
        max_num_batched_tokens=3,
        max_num_seqs=1,
        max_model_len=3,
        gpu_memory_utilization=0.9,
        tensor_parallel_size=1,
        enforce_eager=False,
        chunked_prefill=False,
        hf_config=None,
        awq_config=None,
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
    seqs = list(engine.schedule())
    ended = [
        i for i, seq in enumerate(seqs) if computed(seq, True) == tuple(seq.token_ids)
    ]
    tokens = [NEXT[tuple(seqs[i].token_ids)] for i in ended]
    engine.postprocess(seqs, tokens, ended)


def done(engine, requests):
    return engine.is_finished()


def pool(engine, requests):
    manager = engine.block_manager
    return {
        "blocks": [block.ref_count for block in manager.blocks],
        "free": list(manager.free_block_ids),
        "used": list(manager.used_block_ids),
        "cached": cached(manager),
        "tables": {name: list(seq.block_table) for name, seq in requests.items()},
    }


def pool_problem(pool):
    """What is wrong with the block pool (None: nothing): every block free, cached or used,
    once; a used block's ref_count the number of block tables holding it."""
    free, used, cached = pool["free"], pool["used"], pool.get("cached", [])
    for name, blocks in (("free list", free), ("cache", cached)):
        twice = sorted(b for b in set(blocks) if blocks.count(b) > 1)
        if twice:
            return f"block {twice[0]} is in the {name} twice"
    for one, x, two, y in ((free, "free", used, "used"), (cached, "cached", used, "used"),
                           (free, "free", cached, "cached")):
        both = sorted(set(one) & set(two))
        if both:
            return f"block {both[0]} is both {x} and {y}"
    every = set(range(len(pool["blocks"]))) - set(pool.get("reserved", []))
    seen = set(free) | set(used) | set(cached)
    if seen != every:
        return f"block {sorted(every ^ seen)[0]} is neither free, cached nor used"
    holders = {}
    for name, table in pool["tables"].items():
        for b in table:
            holders.setdefault(b, []).append(name)
    for b in sorted(every):
        refs, held = pool["blocks"][b], holders.get(b, [])
        if refs != len(held):
            return f"block {b} has ref_count {refs}, but {len(held)} block table(s) hold it"
        if (refs > 0) != (b in used):
            return f"block {b} has ref_count {refs} but is {'used' if b in used else 'not used'}"
    return None


class Hung(Exception):
    """A call into the engine that did not return."""


def hung(signum, frame):
    raise Hung(f"a step did not return within {STEP_SECONDS} s")


def test_the_block_pool_adds_up():
    """The block pool adds up (schedcheck's E3)."""
    engine, requests = build(), {}
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
            step(engine, requests, n, None)
        finally:
            signal.alarm(0)
        problem = pool_problem(pool(engine, requests))
        assert problem is None, f"after step {n}: {problem}"
