"""The checks as an exported test states them (issue 48): plain Python over plain data, the
engine's state read into dicts by the adapter's rendered calls, no schedcheck at run time.

Each property is source text, copied into the test file as it stands, and run here on the
plain data read off a trace (`plain_pool`, `plain_state`): a check is exported only where
its property, so stated, fires at the step schedcheck's check fired (export.py), and the
tests show each firing and quiet beside the check it restates.

- `pool_problem` (E3's structure): every block free, cached or used, once; a used block's
  ref_count the number of block tables holding it.
- `schedule_problem` (E1): each scheduled request's positions inside its tokens (those it
  knows and those in flight) and inside its block table.
- `flight_problem` (E11): the scheduler's count of tokens in flight never negative, never
  more than the request has in flight, and its computed count agreeing with both.
- `wasted_problem` (E13): a request running before a step and still running after its
  schedule is left out of it only when the step is full, or every token it may still
  produce is in flight already (a drafter's input rows of the budget counted).
- `lookahead_problem` (E17): a request computed to its last token has blocks for the KV
  its drafter then writes past it.
- `copy_problem` (E8): what a tensor-parallel worker receives of each scheduled sequence
  (pickled and back) carries what its runner reads: a prefill's block table, the two
  fields giving its positions, its length and the tokens at them; a decode's block table,
  length and last token.
- `kv_problem` (E2): the KV as a model would leave it, kept by the test across steps: each
  step writes its requests' positions, every position computed reads its own prefix's
  KV at each position up to it, and every block the prefix cache holds holds the KV of
  the prefix its hash names (checked at each schedule(), where vLLM caches blocks).
"""

from __future__ import annotations

from typing import Any

from schedcheck.engine.runner import Runner
from schedcheck.engine.trace import EngineStep, Pool, computed_on

__all__ = [
    "COPY_PROBLEM",
    "FLIGHT_PROBLEM",
    "KV_PROBLEM",
    "LOOKAHEAD_PROBLEM",
    "POOL_PROBLEM",
    "SCHEDULE_PROBLEM",
    "SOURCES",
    "STATE_READ",
    "WASTED_PROBLEM",
    "plain_pool",
    "plain_state",
    "problem",
]

POOL_PROBLEM = '''def pool_problem(pool):
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
'''

SCHEDULE_PROBLEM = '''def schedule_problem(state):
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
'''

FLIGHT_PROBLEM = '''def flight_problem(state):
    """What is wrong with the count of tokens in flight (None: nothing): never negative,
    never more than the request has in flight (sampled in steps not yet updated), and for
    a running request num_computed_tokens = the tokens it knows + those in flight - 1."""
    for name, (computed, placeholders, in_flight, known, status) in state["progress"].items():
        if placeholders < 0:
            return f"{name}: num_output_placeholders is {placeholders}"
        if placeholders > in_flight:
            return (f"{name}: num_output_placeholders is {placeholders}, but it has "
                    f"{in_flight} token(s) in flight ({status.lower()})")
        if status == "RUNNING" and placeholders and computed != known + placeholders - 1:
            return (f"{name}: num_computed_tokens is {computed}, but it knows {known} tokens "
                    f"and has {placeholders} in flight: {known + placeholders - 1} are computed")
    return None
'''

WASTED_PROBLEM = '''def wasted_problem(before, now):
    """What is wrong with the step just scheduled (None: nothing): a request running before
    it and still running is left out only when the step is full (MAX_NUM_BATCHED_TOKENS,
    MAX_NUM_SEQS) or every token it may still produce is in flight (MOST)."""
    scheduled = now["scheduled"]
    total = sum(entry[1] for entry in scheduled.values())  # each its count of tokens
    left = []
    for name in before["running"]:
        *_, placeholders, _, known, status = now["progress"].get(name, [0] * 4 + ["FINISHED"])
        if status == "RUNNING" and name not in scheduled:
            if known - PROMPTS[name] + placeholders < MOST[name]:
                left.append(name)
    # a drafter's input rows of the budget for each request, and for one more (DRAFT_INPUTS)
    # and the budget the scheduler schedules within (TOKEN_BUDGET: max_num_batched_tokens,
    # or less where the engine takes a drafter's rows off it)
    rows = total + DRAFT_INPUTS * (len(scheduled) + 1)
    if left and rows < TOKEN_BUDGET and len(scheduled) < MAX_NUM_SEQS:
        return (f"{', '.join(left)} running, left out of this step, though it scheduled "
                f"{total} of its token budget {TOKEN_BUDGET} and "
                f"{len(scheduled)} of max_num_seqs {MAX_NUM_SEQS} requests")
    return None
'''

LOOKAHEAD_PROBLEM = '''def lookahead_problem(state):
    """What is wrong with the step just scheduled (None: nothing): after a step that computes
    a request to its last token, its drafter writes the KV of its drafts at the LOOKAHEAD
    positions after it (those below MAX_MODEL_LEN), which its block table must cover."""
    for name, (start, count, size, blocks, *_) in state["scheduled"].items():
        end = start + count
        if end != size or end >= MAX_MODEL_LEN:
            continue  # a prefill chunk short of its end drafts nothing
        need = min(end + LOOKAHEAD, MAX_MODEL_LEN)
        if len(blocks) * BLOCK_SIZE < need:
            return (f"{name} computes up to position {end - 1} and its drafter then writes "
                    f"the KV of its drafts up to position {need - 1}, but its block table "
                    f"{blocks} covers only {len(blocks) * BLOCK_SIZE} positions: lookahead "
                    "slots not reserved")
    return None
'''

KV_PROBLEM = '''def kv_problem(state, kv):
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
'''

COPY_PROBLEM = '''def copy_problem(state):
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
'''

SOURCES = {
    "E1": SCHEDULE_PROBLEM,
    "E2": KV_PROBLEM,
    "E3": POOL_PROBLEM,
    "E8": COPY_PROBLEM,
    "E11": FLIGHT_PROBLEM,
    "E13": WASTED_PROBLEM,
    "E17": LOOKAHEAD_PROBLEM,
}
"""Each exported check's property, by the check it restates."""

STATE_READ = ("E1", "E2", "E8", "E11", "E13", "E17")
"""The properties read off the scheduler's state (`plain_state`: what the adapter's
`state()` returns) after the calls a step makes, rather than off its block pool."""


def problem(source: str, *args: Any, **constants: Any) -> str | None:
    """Run a property's source here, as the test runs it, with the test's module constants
    (BLOCK_SIZE, MOST, ...): what it finds."""
    namespace: dict[str, Any] = dict(constants)
    exec(source, namespace)  # our own source, the test's copy of it
    name = source.split("(", 1)[0].removeprefix("def ")
    found = namespace[name](*args)
    return None if found is None else str(found)


def plain_pool(pool: Pool) -> dict[str, Any]:
    """A pool as the exported test's `pool()` gives it."""
    return {
        "blocks": [b.ref_count for b in pool.blocks],
        "free": list(pool.free),
        "used": list(pool.used),
        "cached": list(pool.cached),
        "reserved": list(pool.reserved),
        "tables": {n: list(t) for n, t in pool.tables.items()},
    }


def plain_state(
    step: EngineStep | None, pool: Pool, runner: Runner | None = None
) -> dict[str, Any]:
    """The scheduler's state as the exported test's `state()` gives it: `step`'s schedule
    (none where `step` is None: the state after an update; each request's start, count,
    size, block table, drafts and tokens), the running list, each unfinished request's
    computed count, its count in flight as the scheduler keeps it and as it is, the tokens
    it knows and its status, and the blocks the prefix cache holds."""
    seqs = step.scheduled if step is not None else ()
    copies = (*step.copies, *[None] * len(seqs)) if step is not None else ()
    scheduled = {
        s.name: [
            s.num_cached,
            s.num_scheduled,
            len(s.token_ids),
            list(s.block_table),
            s.drafts,
            list(computed_on(s, copies[i])),  # its drafts the runner's, where it keeps them
        ]
        for i, s in enumerate(seqs)
    }
    progress = {
        p.name: [
            p.computed,
            p.placeholders,
            p.in_flight,
            len(pool.tokens.get(p.name, ())),
            pool.status.get(p.name, "WAITING"),
        ]
        for p in pool.progress
    }
    # the blocks the prefix cache holds, each with the prefix its hash names
    hashed = {b: list(pool.blocks[b].token_ids) for _, b in pool.cache_index}
    prefill = step is not None and runner is not None and runner.by_prefill_rule(step.is_prefill)
    return {
        "scheduled": scheduled,
        "running": list(pool.running),
        "progress": progress,
        "hashed": hashed,
        "prefill": prefill,
        "copies": _copies(step, runner),
    }


def _copies(step: EngineStep | None, runner: Runner | None) -> dict[str, Any]:
    """What each scheduled sequence's worker reads of its pickled copy, as the exported
    test's state() gives it (`copy_problem`): the step's copies read by the runner's rule."""
    if step is None or runner is None or not step.copies:
        return {}
    copies: dict[str, Any] = {}
    for seq, copy in zip(step.scheduled, step.copies, strict=False):
        read = runner.prefill_read(copy.num_cached, copy.num_scheduled, len(seq.token_ids))
        first, count = read if read is not None else (None, None)
        copies[seq.name] = [
            None if copy.block_table is None else list(copy.block_table),
            copy.num_tokens,
            copy.last_token,
            first,
            count,
            None if copy.token_ids is None else list(copy.token_ids),
        ]
    return copies
