"""nano-vllm's part of an exported test (engine/export.py): its Scheduler driven as its
LLMEngine.step() drives it, in its own calls, from a checkout's text alone (nothing of the
fork runs here).

The test is written to live in the fork's repository and run from its root (`python -m
pytest`): it imports the fork's `Scheduler`, `Sequence` and `SamplingParams`, builds the
Scheduler from a namespace of the Config fields it reads (its own Config loads a model's
config from the hub and asserts a block size of 256), sets `Sequence.block_size` as its
LLMEngine does, and each step calls `schedule()`, then `postprocess()` with the tokens the
model gave the positions the fork's runner computes (its generation's rule, runners.py).
Shapes the export does not write yet say so: a fork driven through its own step, a mixed
batch, a Sequence of voxcpm's shape, an engine loop that finishes sequences itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

from schedcheck.engine.adapter import EngineSetup
from schedcheck.engine.export import Rendered
from schedcheck.engine.nanovllm.config import ranks
from schedcheck.engine.nanovllm.copyout import CACHED
from schedcheck.engine.nanovllm.runners import RUNNERS
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.workload import EOS

__all__ = ["render"]


def _arguments(source: Path, cls: str, method: str) -> list[str] | None:
    """The parameter names of `cls.method` in `source`'s text (None: not found)."""
    try:
        tree = ast.parse(source.read_text(errors="replace"))
    except (OSError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == method:
                    return [a.arg for a in fn.args.args]
    return None


def render(setup: EngineSetup, trace: EngineTrace) -> Rendered | str:
    """The fork's calls for the exported test, or why they are not written."""
    runner = RUNNERS.get(setup.runner)
    engine = setup.folder / "engine"
    if trace.traits.runner.name == "own":
        return (
            "a failure of its own step (its model runner ran): the exported test drives its "
            "Scheduler, so export the failure --loop scheduler finds"
        )
    if runner is None:
        return f"a runner schedcheck does not know ({setup.runner})"
    sequence = _arguments(engine / "sequence.py", "Sequence", "__init__")
    if sequence is not None and sequence[1:2] == ["seq_id"]:
        return "a Sequence of nano-vllm-voxcpm's shape (seq_id, token_ids, block_size)"
    post = _arguments(engine / "scheduler.py", "Scheduler", "postprocess")
    if post is None:
        return "a Scheduler without postprocess() (its engine loop finishes sequences itself)"
    c = trace.workload.config
    fields = {
        **setup.config,
        "max_num_seqs": c.max_num_seqs,
        "max_num_batched_tokens": c.max_num_batched_tokens,
        "eos": EOS,
        "kvcache_block_size": c.block_size,
        "num_kvcache_blocks": c.num_blocks,
        "max_model_len": trace.workload.longest(),
    }
    config = ",\n".join(f"    {k}={v!r}" for k, v in fields.items())
    first = (
        f"min(seq.{runner.start}, len(seq.token_ids) - 1)"
        if runner.clamp
        else f"seq.{runner.start}"
    )
    end = {
        "count": f"{first} + seq.{runner.span_field}",
        "end": f"seq.{runner.span_field} or len(seq.token_ids)",
        "rest": "len(seq.token_ids)",
    }[runner.span]
    p = setup.package
    params = "temperature=1.0, max_tokens=max_tokens"
    if "ignore_eos" not in setup.lacks:
        params += ", ignore_eos=ignore_eos"
    step = (
        "seqs, is_prefill = engine.schedule()[:2]\n"
        "LATEST[:] = [seqs, is_prefill]\n"
        "if seen:\n"
        '    seen("schedule()")\n'
        "tokens = [NEXT[computed(seq, is_prefill)] for seq in seqs]\n"
        "# postprocess(seqs, token_ids), or (..., is_prefill) in later commits: read at run time,\n"
        "# so that the test runs on the commit that has the bug and on the one that fixed it\n"
        "takes = len(inspect.signature(engine.postprocess).parameters)\n"
        "engine.postprocess(seqs, tokens, *((is_prefill,) if takes >= 3 else ()))"
    )
    if runner.decode == "mixed":  # one batch of both kinds: sequences only, tokens by index
        step = (
            "seqs = list(engine.schedule())\n"
            "LATEST[:] = [seqs, True]  # each row by the prefill rule\n"
            "if seen:\n"
            '    seen("schedule()")\n'
            "ended = [\n"
            "    i for i, seq in enumerate(seqs) if computed(seq, True) == tuple(seq.token_ids)\n"
            "]\n"
            "tokens = [NEXT[tuple(seqs[i].token_ids)] for i in ended]\n"
            "engine.postprocess(seqs, tokens, ended)"
        )
    # the scheduler's state after schedule(), as properties.plain_state has it: what each
    # scheduled sequence computes ([start, count, size, block table, drafts, tokens])
    state = (
        "seqs, is_prefill = LATEST or ([], False)\n"
        "names = {id(seq): name for name, seq in requests.items()}\n"
        "scheduled = {}\n"
        "for seq in seqs:\n"
        "    start, upto = first(seq, is_prefill), len(computed(seq, is_prefill))\n"
        "    tokens = list(seq.token_ids)\n"
        "    table = list(seq.block_table)\n"
        "    scheduled[names[id(seq)]] = [start, upto - start, len(tokens), table, 0, tokens]\n"
        "running = [names[id(seq)] for seq in engine.running if id(seq) in names]\n"
        "copies = {}\n"
        "for seq in seqs if PICKLED else ():  # what its tensor-parallel workers receive\n"
        "    try:\n"
        "        copy = pickle.loads(pickle.dumps(seq))\n"
        "    except Exception as e:\n"
        "        copies[names[id(seq)]] = repr(e)\n"
        "        continue\n"
        "    copies[names[id(seq)]] = worker_view(copy, len(seq.token_ids))\n"
        "return {\n"
        '    "scheduled": scheduled, "running": running, "progress": {}, "hashed": {},\n'
        '    "prefill": is_prefill, "copies": copies,\n'
        "}"
    )
    # what its loop pickled: a __getstate__ of its own and more than one rank (drive.py)
    pickled = any(s.copies for s in trace.steps)
    span = runner.span_field
    count = {
        "count": "(span or 0)",
        "end": "(span or size) - first",
        "rest": "size - first",
    }[runner.span]
    worker = (
        "def worker_view(copy, size):\n"
        '    """What a tensor-parallel worker reads of its copy: [block table, length, last\n'
        "    token, the first position and count its runner's fields give, tokens] (None: a\n"
        '    field its __getstate__ does not send)."""\n\n'
        "    def read(field):\n"
        "        try:\n"
        "            return getattr(copy, field)\n"
        "        except Exception:\n"
        "            return None\n\n"
        '    table, tokens = read("block_table"), read("token_ids")\n'
        f'    start = read("{runner.start}")\n'
        + (f"    span = read({span!r})\n" if span else "")
        + "    first = count = None\n"
        f"    if start is not None{' and span is not None' if runner.span == 'count' else ''}:\n"
        f"        first = {'min(int(start), size - 1)' if runner.clamp else 'int(start)'}\n"
        + ("        span = None if span is None else int(span)\n" if span else "")
        + f"        count = {count}\n"
        '    size_sent, last = read("num_tokens"), read("last_token")\n'
        "    return [\n"
        "        None if table is None else [int(b) for b in table],\n"
        "        None if size_sent is None else int(size_sent),\n"
        "        None if last is None else int(last),\n"
        "        first,\n"
        "        count,\n"
        "        None if tokens is None else [int(t) for t in tokens],\n"
        "    ]\n\n\n"
    )
    return Rendered(
        engine=(
            f"{setup.package}'s scheduling code and what it imports (run from the checkout's root)"
        ),
        imports=(
            "import inspect\n"
            "import pickle\n"
            "import sys\n"
            "from pathlib import Path\n"
            "from types import ModuleType, SimpleNamespace\n\n"
            f"# {p}/__init__.py imports its whole engine (torch, transformers, its kernels);\n"
            "# the scheduler needs none of it: the package is entered without running it\n"
            f'_package = ModuleType("{p}")\n'
            f'_package.__path__ = [str(Path("{p}").resolve())]\n'
            f'sys.modules.setdefault("{p}", _package)\n\n'
            f"from {p}.engine.scheduler import Scheduler  # noqa: E402\n"
            f"from {p}.engine.sequence import Sequence  # noqa: E402\n"
            f"from {p}.sampling_params import SamplingParams  # noqa: E402"
        ),
        helpers=(
            "LATEST = []  # the latest schedule(): its sequences and whether it prefills\n"
            f"PICKLED = {pickled}  # its Sequence has a __getstate__ of its own, sent to "
            f"{ranks(setup)} rank(s)\n\n\n" + worker + "def computed(seq, is_prefill):\n"
            f'    """The tokens whose last position its runner computes this step:\n'
            f'    {runner.describe()}."""\n'
            "    if not is_prefill:\n"
            "        return tuple(seq.token_ids)\n"
            f"    return tuple(seq.token_ids[: {end}])\n\n\n"
            "def first(seq, is_prefill):\n"
            '    """The first position its runner computes this step."""\n'
            f"    return {first} if is_prefill else len(seq.token_ids) - 1\n\n\n"
            "def cached(manager):\n"
            '    """Freed blocks kept for their hash apart from the free list."""\n'
            f"    for name in {CACHED!r}:\n"
            "        kept = getattr(manager, name, None)\n"
            "        if kept is not None:\n"
            "            return sorted(kept.values() if isinstance(kept, dict) else kept)\n"
            "    return []"
        ),
        build_body=(
            f"config = SimpleNamespace(\n{config},\n)\n"
            f"Sequence.block_size = {c.block_size}  # as its LLMEngine sets it\n"
            "return Scheduler(config)"
        ),
        add_body=(
            f"seq = Sequence(list(prompt), SamplingParams({params}))\nengine.add(seq)\nreturn seq"
        ),
        step_body=step,
        state_body=state,
        copies=True,
        pool_body=(
            "manager = engine.block_manager\n"
            "return {\n"
            '    "blocks": [block.ref_count for block in manager.blocks],\n'
            '    "free": list(manager.free_block_ids),\n'
            '    "used": list(manager.used_block_ids),\n'
            '    "cached": cached(manager),\n'
            '    "tables": {name: list(seq.block_table) for name, seq in requests.items()},\n'
            "}"
        ),
        done_body="return engine.is_finished()",
        outputs_body=(
            "prompts = {n: p for arriving in ARRIVALS.values() for n, p, *_ in arriving}\n"
            "return {n: list(seq.token_ids[len(prompts[n]) :]) for n, seq in requests.items()}"
        ),
        replaced=(
            "its Config, by a namespace of the fields its Scheduler reads (its own loads a "
            "model's config and asserts a block size of 256; the workload's blocks are small "
            "so that its code paths are reached in a few tokens)",
            "its model runner and model: the tokens each step's sequences get are read from "
            "NEXT, for the positions its runner computes",
        ),
    )
