"""CodingPlatelets/nano-vllm-v1 7ec374d (nanovllm): E6 (the engine raises nothing) at step 2.

Found by schedcheck (`schedcheck engine`), exported as a test that needs only the engine and
pytest: nanovllm's scheduling code and what it imports (run from the checkout's root). Run:
python -m pytest THIS_FILE.

What schedcheck saw: E6 at step 2, schedule(): raised AssertionError (at line 420 of
nanovllm/engine/block_manager.py, in may_append: assert current_block.hash == -1  #
当前块不应已被缓存)

The requests arrive at the steps written below and run through the engine's own scheduler;
the model is simulated: each step's tokens are read from NEXT, the token schedcheck's model
gave each prefix (a correct engine computes only prefixes listed).
Replaced: its Config, by a namespace of the fields its Scheduler reads (its own loads a
model's config and asserts a block size of 256; the workload's blocks are small so that its
code paths are reached in a few tokens)
Replaced: its model runner and model: the tokens each step's sequences get are read from
NEXT, for the positions its runner computes

Re-run in schedcheck, from a checkout of CodingPlatelets/nano-vllm-v1 at 7ec374d: schedcheck engine . --config chunked_prefill=True --loop scheduler --replay E6.json
(the workload above, saved as JSON)
"""

# The run, as schedcheck saw it:
#   config: num_kvcache_blocks=1 kvcache_block_size=2 max_num_seqs=1 max_num_batched_tokens=1 eos=0 policy=fcfs mode=scheduler
#   requests:
#     r1 prompt [1, 1] max_tokens 1 (step 1)
#   model: next token = crc32 of the sequence so far; eos (0) when it is < 2 mod 16, else 1..1
# what happened:
#   step 1: r1 arrives

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
NUM_BLOCKS = 1
MAX_NUM_SEQS = 1
MAX_NUM_BATCHED_TOKENS = 1
MAX_MODEL_LEN = 3
POLICY = 'fcfs'
NEXT = {(1,): 1, (1, 1): 0}
ARRIVALS = {1: [('r1', [1, 1], 1, False)]}
LAST = 1  # the last arrival: after it, a step with nothing to run ends the test
STEPS = 15  # every request finishes within these (a generous bound)
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
        max_num_batched_tokens=1,
        max_num_seqs=1,
        max_model_len=3,
        gpu_memory_utilization=0.9,
        tensor_parallel_size=1,
        enforce_eager=False,
        hf_config=None,
        eos=0,
        kvcache_block_size=2,
        num_kvcache_blocks=1,
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
    ended = [
        i for i, seq in enumerate(seqs) if computed(seq, True) == tuple(seq.token_ids)
    ]
    tokens = [NEXT[tuple(seqs[i].token_ids)] for i in ended]
    engine.postprocess(seqs, tokens, ended)


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
