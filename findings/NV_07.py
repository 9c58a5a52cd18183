"""GeeeekExplorer/nano-vllm 44a51af (nanovllm): E6 (the engine raises nothing) at step 6.

Found by schedcheck (`schedcheck engine`), exported as a test that needs only the engine and
pytest: nanovllm's scheduling code and what it imports (run from the checkout's root). Run:
python -m pytest THIS_FILE.

What schedcheck saw: E6 at step 6, schedule(): raised AssertionError (at line 105 of
nanovllm/engine/block_manager.py, in may_append: assert last_block.hash == -1)

The requests arrive at the steps written below and run through the engine's own scheduler;
the model is simulated: each step's tokens are read from NEXT, the token schedcheck's model
gave each prefix (a correct engine computes only prefixes listed).
Replaced: its Config, by a namespace of the fields its Scheduler reads (its own loads a
model's config and asserts a block size of 256; the workload's blocks are small so that its
code paths are reached in a few tokens)
Replaced: its model runner and model: the tokens each step's sequences get are read from
NEXT, for the positions its runner computes

Re-run in schedcheck, from a checkout of GeeeekExplorer/nano-vllm at 44a51af: schedcheck engine . --config tensor_parallel_size=1 --loop scheduler --replay E6.json (the workload
written below)
"""

# The run, as schedcheck saw it:
#   config: num_kvcache_blocks=2 kvcache_block_size=2 max_num_seqs=1 max_num_batched_tokens=1 eos=0 policy=fcfs mode=scheduler
#   requests:
#     r1 prompt [1] max_tokens 3 (step 1)
#     r2 prompt [1] max_tokens 2 (step 1)
#   model: next token = crc32 of the sequence so far; eos (0) when it is < 2 mod 16, else 1..2
# what happened:
#   step 1: r1 arrives
#   step 1: r2 arrives
#   step 4: r1 finishes (max_tokens)
#   step 4: r2 preempted

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
MAX_NUM_BATCHED_TOKENS = 1
MAX_MODEL_LEN = 4
POLICY = 'fcfs'
NEXT = {(1,): 2, (1, 2): 2, (1, 2, 2): 2}
ARRIVALS = {1: [('r1', [1], 3, False), ('r2', [1], 2, False)]}
LAST = 1  # the last arrival: after it, a step with nothing to run ends the test
STEPS = 30  # every request finishes within these (a generous bound)
STEP_SECONDS = 10  # a step that takes longer hangs (schedcheck's E6)


def computed(seq, is_prefill):
    """The tokens whose last position its runner computes this step:
    prefill computes num_scheduled_tokens tokens from min(num_cached_tokens, len(seq)-1) (tokens from token_ids); decode computes position len(seq)-1 from last_token, into block_table[-1]."""
    if not is_prefill:
        return tuple(seq.token_ids)
    return tuple(seq.token_ids[: min(seq.num_cached_tokens, len(seq.token_ids) - 1) + seq.num_scheduled_tokens])


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
        max_model_len=4,
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
    tokens = [NEXT[computed(seq, is_prefill)] for seq in seqs]
    engine.postprocess(seqs, tokens, is_prefill)


def done(engine, requests):
    return engine.is_finished()


class Hung(Exception):
    """A call into the engine that did not return."""


def hung(signum, frame):
    raise Hung(f"a step did not return within {STEP_SECONDS} s")


def test_the_engine_raises_nothing():
    """The engine raises nothing (schedcheck's E6)."""
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
            step(engine, requests, n, None)  # E6: it raises nothing
        finally:
            signal.alarm(0)
