"""HuangRZzzz/nano-vllm-learing 6c1ab66 (nano-vllm-learing-6c1ab66): E8 (a scheduled sequence's pickled copy
carries what the runner needs) at step 1.

Found by schedcheck (`schedcheck engine`), exported as a test that needs only the engine and
pytest: nanovllm's scheduling code and what it imports (run from the checkout's root). Run:
python -m pytest THIS_FILE.

What schedcheck saw: E8 at step 1, pickle: r1's pickled copy carries last_token None, but
this decode step computes position 0, token 1

The requests arrive at the steps written below and run through the engine's own scheduler;
the model is simulated: each step's tokens are read from NEXT, the token schedcheck's model
gave each prefix (a correct engine computes only prefixes listed).
Replaced: its Config, by a namespace of the fields its Scheduler reads (its own loads a
model's config and asserts a block size of 256; the workload's blocks are small so that its
code paths are reached in a few tokens)
Replaced: its model runner and model: the tokens each step's sequences get are read from
NEXT, for the positions its runner computes

Re-run in schedcheck, from a checkout of HuangRZzzz/nano-vllm-learing at 6c1ab66: schedcheck engine . --loop scheduler --replay E8.json (the workload
written below, saved as JSON)
"""

# The run, as schedcheck saw it:
#   config: num_kvcache_blocks=1 kvcache_block_size=2 max_num_seqs=1 max_num_batched_tokens=2 eos=0 policy=fcfs mode=scheduler
#   requests:
#     r1 prompt [1] max_tokens 1 (step 1)
#   model: next token = crc32 of the sequence so far; eos (0) when it is < 2 mod 16, else 1..1
# what happened:
#   step 1: r1 arrives
#   step 1: r1 finishes (max_tokens)

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
NUM_BLOCKS = 1
MAX_NUM_SEQS = 1
MAX_NUM_BATCHED_TOKENS = 2
MAX_MODEL_LEN = 2
POLICY = 'fcfs'
NEXT = {(1,): 1}
ARRIVALS = {1: [('r1', [1], 1, False)]}
LAST = 1  # the last arrival: after it, a step with nothing to run ends the test
STEPS = 13  # every request finishes within these (a generous bound)
STEP_SECONDS = 10  # a step that takes longer hangs (schedcheck's E6)
WORKER_FIELDS = ['num_cached_tokens']  # where its runner's prefill starts, and its span


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
    start, span = read("num_cached_tokens"), None
    first = count = None
    if start is not None:
        first = int(start)
        count = size - first
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
    prefill computes every token to the end from num_cached_tokens (tokens from token_ids); decode computes position len(seq)-1 from last_token, into block_table[-1]."""
    if not is_prefill:
        return tuple(seq.token_ids)
    return tuple(seq.token_ids[: len(seq.token_ids)])


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
        max_num_seqs=1,
        max_model_len=2,
        gpu_memory_utilization=0.9,
        tensor_parallel_size=1,
        enforce_eager=False,
        hf_config=None,
        eos=0,
        kvcache_block_size=2,
        num_kvcache_blocks=1,
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


def copy_problem(state):
    """What is wrong with what a tensor-parallel worker receives (None: nothing): each
    scheduled sequence pickled and back (state["copies"]: its block table, length, last
    token, the first position and count its runner's two fields give, its tokens; None
    where its __getstate__ sends no such field) carries what the runner reads of it: a
    prefill (state["prefill"]) its block table, fields, length and the tokens computed; a
    decode its block table, length and last token."""
    for name, (start, count, size, table, _, tokens) in state["scheduled"].items():
        if name not in state["copies"]:
            continue
        copy = state["copies"][name]
        if isinstance(copy, str):
            return f"{name} cannot be pickled: {copy}"
        ctable, csize, last, cstart, ccount, ctokens = copy
        said = f"{name}'s pickled copy carries"
        if ctable != table:
            return f"{said} block table {ctable}, not {table}"
        if csize is not None and csize != size:
            return f"{said} num_tokens {csize}, not {size}"
        if not state["prefill"]:
            if last != tokens[-1]:
                return (f"{said} last_token {last}, but this decode step computes position "
                        f"{size - 1}, token {tokens[-1]}")
            continue
        if cstart is None:
            return f"{said} no {' or '.join(WORKER_FIELDS)}, which the runner reads"
        if (cstart, ccount) != (start, count):
            return (f"{said} positions {cstart}..{cstart + ccount - 1} in its fields, not "
                    f"{start}..{start + count - 1}")
        have = ctokens or []
        end = min(start + count, size)
        if any(p >= len(have) or have[p] != tokens[p] for p in range(start, end)):
            shown = "no tokens" if ctokens is None else f"tokens {ctokens}"
            return (f"{said} {shown}, but this step computes positions {start}.."
                    f"{start + count - 1}: {tokens[start:start + count]}")
    return None


class Hung(Exception):
    """A call into the engine that did not return."""


def hung(signum, frame):
    raise Hung(f"a step did not return within {STEP_SECONDS} s")


def test_a_scheduled_sequence_s_pickled_copy_carries_what_the_runner_():
    """A scheduled sequence's pickled copy carries what the runner needs (schedcheck's E8)."""
    engine, requests = build(), {}
    states, before = [], None  # the states read; the last one of the step before

    def seen(call):
        """After a call the property reads: the scheduler's state, checked."""
        now = state(engine, requests)
        found = copy_problem(now) if call == "schedule()" else None
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
