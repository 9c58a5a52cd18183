"""Engine workloads that reach the hard parts of a real engine's scheduler, and labels that
show they do (docs/engines.md).

Prompts are drawn over a tiny vocabulary from one or two shared stems, so prefixes repeat:
prefix-cache hits, whole-prompt hits, and hits on blocks that sit in the free list. Block
sizes of 2 to 4 and pools just above the largest request's need force preemption,
re-prefill after it and chunked prefill; arrivals spread over steps; eos comes from the
token function (sometimes), and some requests ignore it. Everything shrinks toward fewer
requests, shorter prompts, earlier arrivals and smaller configs.

What an engine has beyond that, its adapter declares (adapter.Features) and its workloads
draw: the priority policy with a priority per request, stop tokens, aborts at any step,
longer outputs, tighter pools, and blocks its pool keeps out of play (vLLM's null block).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from itertools import pairwise

from hypothesis import strategies as st

from schedcheck.engine.adapter import PLAIN, Features
from schedcheck.engine.adapters import at_limit
from schedcheck.engine.layers import STATE_KINDS
from schedcheck.engine.trace import (
    PAUSED,
    UNKNOWN,
    EngineStep,
    EngineTrace,
    Pool,
    Scheduled,
    computed_on,
)
from schedcheck.engine.transfers import Span, spans
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload

MAX_REQUESTS = 5

PREFIX_HIT = "prefix-cache hit"
WHOLE_PROMPT_HIT = "every full block of a prompt cached"
FREE_BLOCK_HIT = "hit on a freed block (free list or cached)"
PREEMPTION = "preemption"
REPREFILL = "re-prefill after preemption, with output"
CHUNKED = "chunked prefill"
MID_RUN = "mid-run arrival"
EOS_FINISH = "finish by eos"
IGNORED_EOS = "eos ignored (ignore_eos)"
ABORTED = "abort (finish_requests) of an unfinished request"
STOPPED = "finish by a stop token"
CAPPED = "finish by max_model_len"
PRIORITY = "preemption under the priority policy"
RETRACTED_BY_PRIORITY = "preemption where retraction goes by priority"
RESET = "prefix cache cleared with requests running"
SKIPPED = "a running request left out of a step"
IN_FLIGHT_PREEMPTION = "preemption of a request with a step in flight"
IN_FLIGHT_ABORT = "abort of a request with a step in flight"
EARLY = "a batch the device finished before the engine core looked"
DRAFTS_ALL = "every draft of a step accepted"
DRAFTS_NONE = "every draft of a step rejected"
DRAFTS_SOME = "some drafts of a step accepted"
DRAFTS_FEW = "a decode with fewer drafts than asked, or none"
DRAFTS_PREEMPTED = "preemption of a request with drafts scheduled the step before"
DRAFTS_LOOKAHEAD = "a decode whose drafter writes KV past the step (lookahead slots)"
DRAFTS_BY_BATCH = "a decode in a batch its draft schedule drafts less after (by batch size)"
EXTERNAL_HIT = "external prefix hit (a KV connector's load)"
ASYNC_LOAD = "asynchronous KV load"
LOAD_FAILED = "failed KV load, policy {}"
DELAYED_FREE = "blocks kept after their request finished, for its save"
TRANSFER_ABORT = "abort of a request while its KV load or save runs"
SAVE_PREEMPTION = "preemption while a save holds blocks"
LOOKUP_WAIT = "a connector's lookup answered not yet, then a hit"
# the engine's own offloading connector (connector "offloading")
OFFLOAD_STORE = "a store job to the offload tier"
OFFLOAD_HIT = "a prefix loaded back from the offload tier"
OFFLOAD_FLUSH = "an offload job flushed: its blocks handed on before it was done"
OFFLOAD_REUSED = "an offload tier block stored over with another prefix (evicted)"
OFFLOAD_PREEMPTION = "preemption while a store job of the request runs"
OFFLOADING = (OFFLOAD_STORE, OFFLOAD_HIT, OFFLOAD_FLUSH, OFFLOAD_REUSED, OFFLOAD_PREEMPTION)
SESSION_CONTINUED = "session continued by a chunk"
SESSION_QUEUED = "session chunk sent while its turn still ran"
SESSION_PREEMPTED = "session continued after a preemption"
SESSION_TIGHT = "preemption while a session waits for its client, holding blocks"
SESSIONS = (SESSION_CONTINUED, SESSION_QUEUED, SESSION_PREEMPTED, SESSION_TIGHT)
# hybrid models (issue 51): a KV cache group a layer
LAYER_FREED = (
    "a block a window, chunk or Mamba layer no longer reads freed, the null block in its place"
)
LAYER_HANDED_ON = "a block one KV cache group freed handed to another group"
LAYER_HIT = "a prefix hit a window or chunk group holds blocks of"
LAYER_SHORTENED = "a prefix hit shortened: full attention held more, another group lacked it"
LAYER_REPREFILL = "a hybrid model's request re-prefilled after preemption"
HYBRID = (LAYER_FREED, LAYER_HANDED_ON, LAYER_HIT, LAYER_SHORTENED, LAYER_REPREFILL)
STATE_HIT = "a prefix hit on a Mamba state (its cached block read)"
STATE_SPLIT = "a prefill chunk cut at a block boundary for a Mamba state (aligned split)"
STATES = (STATE_HIT, STATE_SPLIT)
# where an abort lands (issue 52): the request's state when the engine receives it
ABORT_WAITING = "abort of a request that never ran, still waiting"
ABORT_PREEMPTED = "abort of a preempted request, back in the waiting queue"
ABORT_CHUNKED = "abort of a request between two chunks of its prefill"
ABORT_POINTS = (ABORT_WAITING, ABORT_PREEMPTED, ABORT_CHUNKED)
STREAMED_PREEMPTION = "preemption of a request whose client was streamed output"
REFUSED = "an arrival refused by the queue limit"
MIXED_STEP = "a step computing a prefill chunk beside decodes"
NAMESPACE_APART = "a prompt prefix another namespace computed before, not shared"
LOGPROBS_CAP = "a prefix-cache hit cut at the position prompt logprobs are asked from"
ADAPTERS_FULL = "a request left waiting while the step ran as many LoRA adapters as served"
EMBEDS_APART = "a prompt prefix computed before, not shared with a request carrying embeddings"
SPEC = (DRAFTS_ALL, DRAFTS_NONE, DRAFTS_SOME, DRAFTS_FEW, DRAFTS_PREEMPTED, DRAFTS_LOOKAHEAD)
LABELS = (
    PREFIX_HIT,
    WHOLE_PROMPT_HIT,
    FREE_BLOCK_HIT,
    PREEMPTION,
    REPREFILL,
    CHUNKED,
    MID_RUN,
    EOS_FINISH,
    IGNORED_EOS,
)


def labels(
    features: Features, modes: tuple[str, ...] = ("",), reaches: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """The hard parts an engine with `features`, run in `modes`, can reach; `reaches`: those
    its adapter says this setup reaches besides (EngineSetup.reaches: SKIPPED, and where
    steps overlap IN_FLIGHT_PREEMPTION and IN_FLIGHT_ABORT)."""
    extra = (
        (ABORTED, features.aborts),
        (STOPPED, features.stops),
        (PRIORITY, features.priorities),
        (RESET, features.resets),
        (CAPPED, features.caps),
    )
    shown = tuple(mode_label(m) for m in modes) if len(modes) > 1 else ()
    base = tuple(label for label in LABELS if features.ignore_eos or label != IGNORED_EOS)
    spec = (
        (*SPEC, *((DRAFTS_BY_BATCH,) if features.draft_schedules else ()))
        if features.drafts
        else ()
    )
    connector = (
        (
            EXTERNAL_HIT,
            ASYNC_LOAD,
            *(LOAD_FAILED.format(p) for p in features.load_failures),
            DELAYED_FREE,
            LOOKUP_WAIT,
            *((TRANSFER_ABORT,) if features.aborts else ()),
            SAVE_PREEMPTION,
        )
        if "simulated" in features.connectors
        else ()
    ) + (OFFLOADING if "offloading" in features.connectors else ())
    sessions = SESSIONS if features.sessions else ()
    scheduling = (
        *(ABORT_POINTS if features.aborts else ()),
        *((STREAMED_PREEMPTION,) if features.streams else ()),
        *((REFUSED,) if features.queue_limit else ()),
        *((MIXED_STEP,) if features.mixed else ()),
        *((NAMESPACE_APART,) if features.namespaces else ()),
        *((RETRACTED_BY_PRIORITY,) if features.retract_by_priority else ()),
        *((LOGPROBS_CAP,) if features.prompt_logprobs else ()),
        *((ADAPTERS_FULL,) if features.adapters else ()),
        *((EMBEDS_APART,) if features.embeds else ()),
        *(policy_label(p) for p in features.policies),
    )
    states = bool(set(features.layers) & set(STATE_KINDS))
    hybrid = (
        (
            *(h for h in HYBRID if h != LAYER_HIT or set(features.layers) - set(STATE_KINDS)),
            *(STATES if states else ()),
        )
        if features.layers
        else ()
    )
    return (
        *base,
        *(label for label, has in extra if has),
        *spec,
        *connector,
        *sessions,
        *hybrid,
        *scheduling,
        *reaches,
        *shown,
    )


def mode_label(mode: str) -> str:
    return f"mode {mode}"


def policy_label(policy: str) -> str:
    return f"policy {policy}"


_TOKENS = st.integers(1, 3)


@st.composite
def engine_workloads(
    draw: st.DrawFn,
    max_requests: int = MAX_REQUESTS,
    whole_prefill: bool = False,
    features: Features = PLAIN,
    modes: tuple[str, ...] = ("",),
) -> EngineWorkload:
    """`whole_prefill` for an engine that does not chunk prefills (nano-vllm before
    8d63a98, and forks): a prefill computes a sequence to its end in one step, so the
    budget must hold the longest one (a prompt and the output a preempted sequence
    re-prefills with), as nano-vllm's config asserted. `modes`: the modes drawn from, the
    first the one everything shrinks to (one mode: nothing is drawn)."""
    vocab = draw(st.integers(1, 3))
    tokens = st.integers(1, vocab)
    stems = draw(st.lists(st.lists(tokens, min_size=1, max_size=8), min_size=1, max_size=2))
    count = draw(st.integers(1, max_requests))
    arrivals = sorted(draw(st.lists(st.integers(1, 4), min_size=count, max_size=count)))
    requests = []
    for i, arrival in enumerate(arrivals, start=1):
        stem = draw(st.sampled_from(stems))
        prompt = stem[: draw(st.integers(0, len(stem)))] + draw(st.lists(tokens, max_size=3))
        request = EngineRequest(
            f"r{i}",
            tuple(prompt or [1]),
            draw(st.integers(1, features.max_tokens)),
            draw(st.booleans()) if features.ignore_eos else False,
            arrival,
        )
        request = _extras(draw, request, vocab, features)
        requests.append(request)
    # the engine's block sizes (nano-vllm never sees a block of one token)
    low, high = features.block_sizes
    step = features.block_step
    block_size = (
        draw(st.integers(low, high))
        if step == 1
        else step * draw(st.integers(low // step, high // step))
    )
    need = max(r.peak_blocks(block_size, features.headroom) for r in requests)
    seqs = draw(st.integers(1, 4))
    # An engine that does not chunk prefills admits no prompt over the budget (nano-vllm
    # asserted max_num_batched_tokens >= max_model_len then): the budget holds the longest
    # sequence, a re-prefill after preemption included.
    longest = max(len(r.prompt) + r.max_tokens for r in requests) if whole_prefill else 1
    # the blocks the pool keeps out of play on top; an engine whose requests run together
    # from the first step (no prefill-only steps) preempts only in a pool close to the need
    blocks = draw(st.integers(need, need + features.pool_slack)) + features.reserved
    low = max(seqs, longest)
    if features.budget_in_blocks:  # a whole number of blocks, as low as can be
        budget = block_size * draw(
            st.integers(-(-low // block_size), max(12, low) // block_size + 1)
        )
    else:
        budget = draw(st.integers(low, max(12, longest)))
    config = EngineConfig(
        num_blocks=blocks,
        block_size=block_size,
        max_num_seqs=seqs,
        # A decode step gives every running sequence a token up to max_num_seqs, without
        # looking at the token budget: valid configs keep the budget at least that large.
        max_num_batched_tokens=budget,
        policy=draw(st.sampled_from(["fcfs", "priority"])) if features.priorities else "fcfs",
    )
    eos = draw(st.sampled_from([2, 0, 5]))
    # drawn last, and only where the engine has them: the draws of an engine without them
    # are the same as before they existed
    if len(modes) > 1:
        config = replace(config, mode=draw(st.sampled_from(modes)))
    elif modes[0]:  # one mode, named: saved with the workload, which replays in it
        config = replace(config, mode=modes[0])
    resets: tuple[int, ...] = ()
    if features.resets and draw(st.integers(0, 3)) == 3:  # one workload in four
        resets = (draw(st.integers(2, 8)),)
    # a max_model_len that caps the longest requests, one workload in four: the pool drawn
    # above holds it (its need counted every request's whole length), and every prompt
    # leaves room for an output (vLLM's input processor refuses one that does not)
    low, high = max(len(r.prompt) for r in requests) + 1, longest_of(requests) - 1
    if features.caps and low <= high and draw(st.integers(0, 3)) == 3:
        config = replace(config, max_model_len=draw(st.integers(low, high)))
    early: tuple[int, ...] = ()
    if features.timing and draw(st.integers(0, 3)) == 3:  # one workload in four
        early = tuple(sorted(draw(st.sets(st.integers(1, 8), min_size=1, max_size=3))))
    if features.conservativeness:  # its default, or admissions that retraction undoes
        config = replace(config, conservativeness=draw(st.sampled_from([1.0, 0.3, 0.1])))
    drafts, miss, drafter = 0, 0, "lookup"
    if features.drafts and draw(st.integers(0, 2)) == 2:  # one workload in three
        drafts, miss = draw(st.integers(1, features.drafts)), draw(st.integers(0, 8))
        if features.draft_modes and config.mode not in features.draft_modes:
            config = replace(config, mode=features.draft_modes[0])
        # a drafter the release runs in the workload's mode (the search keeps its modes'
        # shares: a release that runs only EAGLE async drafts with EAGLE there); where none
        # does, any, in a mode of its own
        here = [d for d in features.drafters if not d[1] or config.mode in d[1]]
        drafter, its_modes = draw(st.sampled_from(here or features.drafters))
        if its_modes and config.mode not in its_modes:
            config = replace(config, mode=its_modes[0])
        # a lone request's drafts after its last token take KV slots too, and a drafter
        # with a forward pass writes as many again after them (E17)
        extra = -(-(drafts + (drafts if drafter != "lookup" else 0)) // config.block_size)
        config = replace(config, num_blocks=config.num_blocks + extra)
        # a budget that holds a decode and its drafts: vLLM pads a one-token admission to
        # 1 + num_speculative_tokens and never schedules it unpadded (a budget below that
        # starves it for good: docs/engines.md, "Speculative decoding")
        # (a draft model's input keeps one more row per request: vLLM 0.34 takes it off the
        # budget per request scheduled, 0.2x off the whole budget per max_num_seqs)
        rows = config.max_num_seqs if drafter == "model" else 0
        budget = max(config.max_num_batched_tokens, 1 + drafts + rows)
        if features.budget_in_blocks:
            budget = -(-budget // config.block_size) * config.block_size
        config = replace(config, max_num_batched_tokens=budget)
    schedule: tuple[tuple[int, int, int], ...] = ()
    if drafts and features.draft_schedules and draw(st.integers(0, 1)):  # one in two
        # the batch sizes up to `split` drafting one count, those after another
        split = draw(st.integers(1, config.max_num_seqs))
        small, large = draw(st.integers(0, drafts)), draw(st.integers(0, drafts))
        after = ((split + 1, config.max_num_seqs, large),) if split < config.max_num_seqs else ()
        schedule = ((1, split, small), *after)
    workload = EngineWorkload(
        config, tuple(requests), vocab, eos, resets, early, drafts, miss, drafter, schedule
    )
    if features.connectors and draw(st.integers(0, 2)) == 2:  # one workload in three
        workload = _connector(draw, workload, stems, features)
    if features.sessions and draw(st.integers(0, 2)) == 2:  # one workload in three
        workload = _sessions(draw, workload, vocab, features)
    # one workload in three; none with a KV connector (schedcheck's connector is not one
    # the hybrid manager takes: vLLM turns the manager off for a connector without HMA)
    if features.layers and not workload.connector and draw(st.integers(0, 2)) == 2:
        workload = _layered(draw, workload, features)
    return _scheduling(draw, workload, features)


def _scheduling(draw: st.DrawFn, workload: EngineWorkload, features: Features) -> EngineWorkload:
    """What an engine's server is told of scheduling beyond the budgets, drawn last (an
    engine without them draws as before): another policy (one workload in three), priority
    preemption's gap, mixed steps (one in three), a queue limit (one in four), which
    clients stream, and decode pressure (one in two: `_pressure`)."""
    config, requests = workload.config, list(workload.requests)
    if features.policies and draw(st.integers(0, 2)) == 2:
        config = replace(config, policy=draw(st.sampled_from(features.policies)))
    if config.policy == "routing-key":  # each client's key: none or one of two
        keys = ["", "k1", "k2"]
        requests = [replace(r, routing_key=draw(st.sampled_from(keys))) for r in requests]
    if features.preempt_gap and config.policy == "priority":
        config = replace(config, preempt_gap=draw(st.sampled_from([-1, 0, 1])))
    if features.retract_by_priority and config.policy == "priority":
        config = replace(config, retract_by_priority=draw(st.booleans()))
    if features.mixed and draw(st.integers(0, 2)) == 2:
        config = replace(config, mixed=True)
    # (no queue limit with sessions: an engine that takes a session's turns as requests of
    # their own may refuse a turn as an arrival, which E20 does not tell from a requeue)
    sessions = any(r.session for r in requests)
    if features.queue_limit and not sessions and draw(st.integers(0, 3)) == 3:
        config = replace(config, max_queued=draw(st.integers(1, 3)))
    if features.streams:
        requests = [replace(r, stream=draw(st.booleans())) for r in requests]
    if features.namespaces and draw(st.integers(0, 2)) == 2:  # one workload in three
        # the shared namespace or one of two others: prompts over the workload's shared
        # stems, so a prefix one namespace computed is often another's
        requests = [replace(r, namespace=draw(st.sampled_from(["", "a", "b"]))) for r in requests]
    if features.chunk_aborts and features.aborts and draw(st.integers(0, 3)) == 3:
        # the longest prompt over the budget, if none aborts it, aborted a step after it
        # arrives: after its first chunk where it is admitted at once
        long = [
            i
            for i, r in enumerate(requests)
            if len(r.prompt) > config.max_num_batched_tokens and not r.abort
        ]
        if long:
            i = max(long, key=lambda k: len(requests[k].prompt))
            requests[i] = replace(requests[i], abort=requests[i].arrival + 1)
    if features.prompt_logprobs and not workload.drafts and draw(st.integers(0, 2)) == 2:
        # one workload in three (none that drafts): a request in two asks its prompt's
        # logprobs from a position of it below its last (the most a prefix hit covers),
        # often below a prefix another request computed
        # (a session's prompt logprobs are not drawn: SGLang ignores them on its turns)
        requests = [
            replace(r, logprobs_from=draw(st.integers(0, max(0, len(r.prompt) - 2))))
            if draw(st.booleans()) and not r.session
            else r
            for r in requests
        ]
    workload = replace(workload, config=config, requests=tuple(requests))
    # (not where max_tokens has ties of its own: caps, a session's turns)
    plain = not (config.max_model_len or any(r.session for r in requests))
    if features.pressure and plain and draw(st.booleans()):  # one workload in two
        workload = _pressure(draw, workload, features)
    if features.adapters and not workload.drafts and draw(st.integers(0, 2)) == 2:
        # one workload in three (none that drafts): a server of one or two adapters at once,
        # each request under the base model or one of two adapters
        config = replace(workload.config, max_adapters=draw(st.integers(1, 2)))
        requests = [
            replace(r, adapter=draw(st.sampled_from(["", "x", "y"]))) for r in workload.requests
        ]
        workload = replace(workload, config=config, requests=tuple(requests))
    if features.embeds and not workload.drafts and draw(st.booleans()):
        # one workload in two (none that drafts): a request in two (no session's turn)
        # carries embeddings of its own in its prompt, over the workload's shared stems
        requests = [
            replace(r, embeds=True) if draw(st.booleans()) and not r.session else r
            for r in workload.requests
        ]
        workload = replace(workload, requests=tuple(requests))
    return workload


def _pressure(draw: st.DrawFn, workload: EngineWorkload, features: Features) -> EngineWorkload:
    """Decode pressure (Features.pressure): two requests or more (a second drawn where one
    was), arriving a step or two apart (those admitted in one step are reserved whole),
    mostly streamed, outputs of three quarters of the longest to the longest, no eos or
    stop tokens, none ignoring eos (an engine reserves such an output whole), admission on
    a tenth or three tenths of what running requests will still decode, and a pool (at
    least the largest request's need) that admits the second request beside the first's
    prompt and first token but holds less than the KV of the two at their ends: what was
    admitted on a fraction outgrows it. The first two are never aborted early: the second
    (the likelier victim) may be aborted late, as it may wait, retracted."""
    most, config, drawn = features.max_tokens, workload.config, list(workload.requests)
    if len(drawn) == 1:  # a second request, for the first to be retracted beside
        prompt = draw(st.lists(st.integers(1, workload.vocab), min_size=1, max_size=6))
        # (its own prompt: prompt logprobs asked of the first's positions are not its)
        drawn.append(replace(drawn[0], name="r2", prompt=tuple(prompt), abort=0, logprobs_from=-1))
    gaps = draw(st.lists(st.integers(1, 2), min_size=len(drawn), max_size=5))
    requests, arrival = [], 1 - gaps[0]
    for i, (r, gap) in enumerate(zip(drawn, gaps, strict=False)):
        arrival += gap
        moved = arrival - r.arrival  # an abort keeps its distance from the arrival
        abort = r.abort + moved if r.abort else 0
        if i < 2:  # the two that press: the first runs on, the second (the likelier
            # victim) is aborted late or not at all, as may land once it was retracted
            late = i == 1 and features.aborts and draw(st.integers(0, 2)) == 2
            abort = arrival + draw(st.integers(10, 20)) if late else 0
        requests.append(
            replace(
                r,
                max_tokens=draw(st.integers(max(1, most * 3 // 4), most)),
                ignore_eos=False,
                stop=(),
                # mostly streamed: what retraction must keep once its client has it
                stream=features.streams and draw(st.sampled_from([True, True, False])),
                arrival=arrival,
                abort=abort,
            )
        )
    seqs = max(2, config.max_num_seqs)
    budget = max(config.max_num_batched_tokens, seqs)
    if features.budget_in_blocks:
        budget = -(-budget // config.block_size) * config.block_size
    # pages for the second request admitted beside the first's prompt, first token and
    # what admission reserves of its remaining output (at most the conservativeness of
    # it), but fewer than the KV of both at their ends (the last token sampled has none)
    first, second = requests[0], requests[1]
    bs, conservativeness = config.block_size, draw(st.sampled_from([0.1, 0.3]))
    reserved = len(first.prompt) + 1 + int(conservativeness * first.max_tokens + 1)
    low = -(-reserved // bs) + -(
        -features.headroom.slots(len(second.prompt), second.max_tokens, bs) // bs
    )
    high = sum(-(-(len(r.prompt) + r.max_tokens - 1) // bs) for r in (first, second)) - 1
    pages = draw(st.integers(low, max(low, high)))
    # each request alone fits, its drafts' slots and its drafter's with it
    drafted = replace(workload, requests=tuple(requests))
    blocks = max(
        *(r.peak_blocks(bs, features.headroom) for r in requests),
        *(drafted.draft_blocks(r) for r in requests if workload.drafts),
        pages,
    )
    config = replace(
        config,
        num_blocks=blocks + features.reserved,
        max_num_seqs=seqs,
        max_num_batched_tokens=budget,
        conservativeness=conservativeness,
    )
    return replace(
        workload,
        config=config,
        requests=tuple(requests),
        eos_per_16=0,
    )


def _layered(draw: st.DrawFn, workload: EngineWorkload, features: Features) -> EngineWorkload:
    """A hybrid model (layers.py): one layer beside full attention, of a kind the engine
    has: a sliding window of 1 to 4 tokens, chunks of one or two blocks, or a Mamba layer
    (not where the workload drafts: its states under speculative decoding are not
    modelled; nor a kind the engine never runs with the workload's drafter: Features.apart);
    a KV cache group each. The pool holds a request of max_model_len in every
    group at once (and a block more each), as an engine's startup check asks of it (vLLM's
    planner does)."""
    kinds = [
        k
        for k in features.layers
        if not (workload.drafts and (k in STATE_KINDS or (k, workload.drafter) in features.apart))
    ]
    if not kinds:
        return workload
    kind = draw(st.sampled_from(kinds))
    c = workload.config
    if kind in STATE_KINDS:
        layer = kind
    elif kind == "window":
        layer = f"window:{draw(st.integers(1, 4))}"
    else:
        layer = f"chunk:{c.block_size * draw(st.integers(1, 2))}"
    layered = replace(workload, layers=(layer,))
    blocks = max(c.num_blocks, layered.hybrid_blocks() + features.reserved)
    budget = c.max_num_batched_tokens
    if kind in STATE_KINDS and features.state_budget:  # the release asks a block at least
        budget = max(budget, c.block_size)
    return replace(layered, config=replace(c, num_blocks=blocks, max_num_batched_tokens=budget))


def _sessions(
    draw: st.DrawFn, workload: EngineWorkload, vocab: int, features: Features
) -> EngineWorkload:
    """Up to `features.sessions` of the requests made streaming-input sessions: one or two
    continuation chunks each, sent from its arrival on (while its turn runs, after it
    stopped, after a preemption: the steps decide), closed with its last chunk or later; the
    pool grown to hold each session alone over every turn."""
    count = draw(st.integers(1, min(features.sessions, len(workload.requests))))
    requests = list(workload.requests)
    for i in range(count):
        r = requests[i]
        step, chunks = r.arrival, []
        for _ in range(draw(st.integers(1, 2))):
            step += draw(st.integers(0, 6))
            chunks.append(
                (step, tuple(draw(st.lists(st.integers(1, vocab), min_size=1, max_size=3))))
            )
        close = draw(st.sampled_from([0, 0, step + 1, step + 3]))
        requests[i] = replace(r, chunks=tuple(chunks), close=close)
    c = workload.config
    need = max(r.peak_blocks(c.block_size, features.headroom) for r in requests)
    config = replace(c, num_blocks=max(c.num_blocks, need + features.reserved))
    return replace(workload, config=config, requests=tuple(requests))


def _connector(
    draw: st.DrawFn, workload: EngineWorkload, stems: list[list[int]], features: Features
) -> EngineWorkload:
    """A KV connector over a store that holds some of the prompts' prefixes (a hit of any
    length: none, whole blocks, part of one, the whole prompt), each request's load
    synchronous or taking steps, now and then failing a block, and its KV saved when it
    finishes after some steps, or not."""
    connector = draw(st.sampled_from(features.connectors))
    if connector == "offloading":
        return _offloading(draw, workload, features)
    prompts = [list(r.prompt) for r in workload.requests]
    sources = stems + prompts
    stored = tuple(
        tuple(p[: draw(st.integers(1, len(p)))])
        for p in draw(st.lists(st.sampled_from(sources), min_size=1, max_size=2))
        if p
    )
    requests = tuple(
        replace(
            r,
            load=draw(st.integers(0, 3)),
            load_fails=tuple(
                sorted(draw(st.sets(st.integers(0, 2), max_size=2)))
                if features.load_failures and draw(st.integers(0, 2)) == 2
                else ()
            ),
            save=draw(st.sampled_from([0, 0, 1, 2, 3])),
            lookup_wait=draw(st.sampled_from([0, 0, 0, 1, 2])),
        )
        for r in workload.requests
    )
    return replace(
        workload,
        requests=requests,
        connector=connector,
        stored=stored,
        load_failure=draw(st.sampled_from(features.load_failures or ("recompute",))),
    )


def _offloading(draw: st.DrawFn, workload: EngineWorkload, features: Features) -> EngineWorkload:
    """The engine's own offloading connector, to a tier of a few blocks (a small one
    evicts), each request's load and store jobs taking 1 to 3 steps; the prefix cache
    cleared now and then, so that a prefix comes back from the tier."""
    requests = tuple(
        replace(r, load=draw(st.integers(1, 3)), save=draw(st.integers(1, 3)))
        for r in workload.requests
    )
    last = max(r.arrival for r in workload.requests) + 4
    resets = workload.resets
    if features.resets and not resets:
        resets = tuple(sorted(draw(st.sets(st.integers(2, last), max_size=2))))
    return replace(
        workload,
        requests=requests,
        connector="offloading",
        offload_blocks=draw(st.integers(1, workload.config.num_blocks)),
        resets=resets,
    )


def longest_of(requests: list[EngineRequest]) -> int:
    return max(len(r.prompt) + r.max_tokens for r in requests)


def _extras(
    draw: st.DrawFn, request: EngineRequest, vocab: int, features: Features
) -> EngineRequest:
    """What the engine has of stop tokens (mostly none), an abort step (mostly never) and a
    priority, drawn in that order."""
    stop: list[int] = []
    if features.stops and (features.stops_when_ignoring_eos or not request.ignore_eos):
        stop = draw(st.lists(st.integers(1, vocab), max_size=1 if vocab > 1 else 0, unique=True))
    abort = 0
    if features.aborts and draw(st.integers(0, 3)) == 3:  # one request in four
        abort = draw(st.integers(request.arrival, request.arrival + 6))
    priority = draw(st.integers(0, 2)) if features.priorities else 0
    # drawn last: an engine without timing draws as before
    in_step = bool(abort) and features.timing and draw(st.booleans())
    return replace(request, priority=priority, stop=tuple(stop), abort=abort, abort_in_step=in_step)


def _between(trace: EngineTrace, previous: Pool, step: EngineStep) -> set[str]:
    """What happened to the requests running after the previous step, in this one."""
    seen: set[str] = set()
    now = step.after_schedule
    running = [n for n, s in previous.status.items() if s == "RUNNING"]
    scheduled = {s.name for s in step.scheduled}
    if running and step.step in trace.workload.resets:
        seen.add(RESET)
    if step.schedules and any(
        now.status.get(n) == "RUNNING" and n not in scheduled for n in running
    ):
        seen.add(SKIPPED)
    in_flight = {p.name for p in previous.progress if p.placeholders > 0}
    if any(now.status.get(n) == "WAITING" for n in in_flight & set(running)):
        seen.add(IN_FLIGHT_PREEMPTION)
    aborted = {r.name for r in trace.workload.requests if r.abort == step.step}
    if any(now.status.get(n) == "FINISHED" for n in in_flight & aborted):
        seen.add(IN_FLIGHT_ABORT)
    return seen


def _abort_points(trace: EngineTrace) -> set[str]:
    """Where each abort landed: the request's state after the step before the one that
    received it (waiting and never run, preempted and requeued, between two prefill
    chunks, or with its last step's result still in flight: scheduled to its end, and
    the pool after that step holding no token of it yet)."""
    seen: set[str] = set()
    steps = {s.step: s for s in trace.steps}
    ran: dict[str, int] = {}  # the first step each request was scheduled at
    for s in trace.steps:
        for seq in s.scheduled:
            ran.setdefault(seq.name, s.step)
    for r in trace.workload.requests:
        before = steps.get(r.abort - 1)
        after = before.after_postprocess if before is not None else None
        if not r.abort or before is None or after is None:
            continue
        status = after.status.get(r.name)
        if status == "WAITING":
            started = ran.get(r.name, r.abort) < r.abort
            seen.add(ABORT_PREEMPTED if started else ABORT_WAITING)
        for seq in before.scheduled:
            if seq.name != r.name or status == "FINISHED":
                continue
            end = seq.num_cached + seq.num_scheduled
            if before.is_prefill and end < len(seq.token_ids):
                seen.add(ABORT_CHUNKED)
            elif end == len(seq.token_ids) and len(after.tokens.get(r.name, ())) <= end:
                seen.add(IN_FLIGHT_ABORT)
    return seen


def _drafts(trace: EngineTrace, step: EngineStep) -> set[str]:
    """What the step's drafts met: verified as the model verifies them (all accepted, none,
    some), or fewer than asked for a request that decodes."""
    seen: set[str] = set()
    w = trace.workload
    if not w.drafts:
        return seen
    copies = (*step.copies, *[None] * len(step.scheduled))
    for i, seq in enumerate(step.scheduled):
        if seq.num_cached + seq.num_scheduled < len(seq.own):
            continue  # a prefill chunk short of its end: no drafts, none asked
        if w.lookahead:
            seen.add(DRAFTS_LOOKAHEAD)
        if w.drafts_after(len(step.scheduled)) < w.drafts:
            seen.add(DRAFTS_BY_BATCH)
        # the drafts the runner computed: the scheduler's, or its own (kv.computed_on)
        drafts = computed_on(seq, copies[i])[len(seq.own) :]
        if seq.drafts < w.drafts or UNKNOWN in drafts:
            seen.add(DRAFTS_FEW)
        # those proposed: before the first placeholder (Scheduled.proposed)
        drafts = drafts[: drafts.index(UNKNOWN)] if UNKNOWN in drafts else drafts
        if drafts:
            accepted = len(w.verify(seq.own, drafts)) - 1
            seen.add(
                DRAFTS_ALL
                if accepted == len(drafts)
                else DRAFTS_NONE
                if not accepted
                else DRAFTS_SOME
            )
    return seen


def _apart(
    trace: EngineTrace,
    step: EngineStep,
    ran: set[str],
    started: set[str],
    apart: Callable[[EngineRequest, EngineRequest], bool],
) -> bool:
    """A request first computed in this step whose prompt begins with a block a request
    `apart` from it (another namespace's; one of them carrying embeddings) computed in
    an earlier step: a prefix it must not share."""
    w = trace.workload
    by_name, bs = {r.name: r for r in w.requests}, w.config.block_size
    for seq in step.scheduled:
        r = by_name[seq.name]
        if seq.name in started or len(r.prompt) <= bs:
            continue
        if any(
            apart(by_name[o], r)
            and len(by_name[o].prompt) > bs
            and by_name[o].prompt[:bs] == r.prompt[:bs]
            for o in ran
        ):
            return True
    return False


def _capped(trace: EngineTrace, previous: Pool, step: EngineStep, started: set[str]) -> bool:
    """A request first computed in this step that asks its prompt's logprobs from a
    position below the longest prefix of its prompt the cache held before the step."""
    by_name = {r.name: r for r in trace.workload.requests}
    for seq in step.scheduled:
        r = by_name[seq.name]
        if seq.name in started or r.logprobs_from < 0:
            continue
        held = [previous.blocks[b].token_ids for _, b in previous.cache_index]
        longest = max((len(p) for p in held if r.prompt[: len(p)] == p), default=0)
        if r.logprobs_from < min(longest, len(r.prompt) - 1):
            return True
    return False


def _session_labels(trace: EngineTrace) -> set[str]:
    """What streaming-input sessions met: a later turn, a chunk sent while its turn ran,
    a session preempted and continued after, a preemption while a session waited for its
    client holding blocks."""
    seen: set[str] = set()
    w = trace.workload
    sessions = [r for r in w.requests if r.session]
    if not sessions:
        return seen
    before: dict[int, Pool] = {}
    previous = None
    preempted: dict[int, set[str]] = {}
    for step in trace.steps:
        if previous is not None:
            before[step.step] = previous
            now = step.after_schedule
            preempted[step.step] = {
                n
                for n in previous.running
                if now.status.get(n) == "WAITING" and not now.tables.get(n)
            }
        previous = step.after_postprocess or step.after_schedule
    for r in sessions:
        turns = w.turns(r, trace.traits.turn_keeps_last)
        continued = len(trace.outputs.get(r.name, ())) > len(turns[0])
        if continued:
            seen.add(SESSION_CONTINUED)
        for at, _ in r.chunks:
            pool = before.get(at)
            if pool is not None and pool.status.get(r.name) == "RUNNING":
                seen.add(SESSION_QUEUED)
        if continued and any(r.name in names for names in preempted.values()):
            seen.add(SESSION_PREEMPTED)
    for at, names in preempted.items():
        pool = before[at]
        if names and any(
            pool.status.get(r.name) == PAUSED and pool.tables.get(r.name) for r in sessions
        ):
            seen.add(SESSION_TIGHT)
    return seen


def _transfers(trace: EngineTrace) -> set[str]:
    """What a KV connector's transfers met (transfers.spans): a load, one that took steps,
    one that failed, a save keeping a finished request's blocks, an abort while a transfer
    of the request ran, a preemption while a save held blocks."""
    seen: set[str] = set()
    w = trace.workload
    plans = {r.name: r for r in w.requests}
    made = spans(trace)
    preempted = {
        step.step
        for before, step in pairwise(trace.steps)
        if before.after_postprocess is not None
        and any(
            step.after_schedule.status.get(n) == "WAITING"
            and before.after_postprocess.status.get(n) == "RUNNING"
            and not step.after_schedule.tables.get(n)
            for n in before.after_postprocess.running
        )
    }
    waited = {t.name for step in trace.steps for t in step.transfers if t.kind == "lookup"}
    stored: dict[int, tuple[int, ...]] = {}  # a tier block: the prefix last stored in it
    for s in made:
        until = s.ended or len(trace.steps)
        if s.start.remote:  # an offloading job
            bs = w.config.block_size
            seen |= _offloaded(s, plans[s.start.name], stored, preempted, until, bs)
            continue
        if s.start.kind == "load" and s.start.name in waited:
            seen.add(LOOKUP_WAIT)
        if s.start.kind == "load":
            seen.add(EXTERNAL_HIT)
            if plans[s.start.name].load:
                seen.add(ASYNC_LOAD)
            if s.end is not None and s.end.failed:
                seen.add(LOAD_FAILED.format(w.load_failure))
        if s.start.kind == "save":
            seen.add(DELAYED_FREE)
            if any(s.started <= p <= until for p in preempted):
                seen.add(SAVE_PREEMPTION)
        if s.started <= plans[s.start.name].abort <= until and s.start.kind == "load":
            seen.add(TRANSFER_ABORT)
    return seen


def _offloaded(
    s: Span,
    plan: EngineRequest,
    stored: dict[int, tuple[int, ...]],
    preempted: set[int],
    until: int,
    bs: int,
) -> set[str]:
    """What one offloading job reached."""
    t, seen = s.start, set[str]()
    planned = max(plan.load if t.kind == "load" else plan.save, 1)
    if (
        s.end is not None
        and s.ended - s.started < planned
        and not (
            t.kind == "load" and s.ended == s.started  # a synchronous load
        )
    ):
        seen.add(OFFLOAD_FLUSH)
    if t.kind == "load":
        return seen | {OFFLOAD_HIT}
    seen.add(OFFLOAD_STORE)
    for i, block in enumerate(t.remote):
        prefix = t.tokens[: t.first + (i + 1) * bs]
        if block in stored and stored[block] != prefix:
            seen.add(OFFLOAD_REUSED)
        stored[block] = prefix
    if any(s.started <= p <= until for p in preempted):
        seen.add(OFFLOAD_PREEMPTION)
    return seen


def _groups(trace: EngineTrace) -> set[str]:
    """What a hybrid model's groups met: a block freed out of a window or chunk (the null
    block in its table); a block one group freed that another holds later; a prefix hit
    the other group holds blocks of (not only null ones); a hit shorter than full
    attention's cache held (its next block of the prompt cached by full attention before
    the step: another group lacked it); a hit on a Mamba state (its block at the hit's
    state index real); a prefill chunk a Mamba layer's aligned split ended at a block
    boundary with room left. (A hybrid model's re-prefill is observe's REPREFILL.)"""
    seen: set[str] = set()
    owner: dict[int, int] = {}  # block -> the group that last held it
    prompts = {r.name: r.prompt for r in trace.workload.requests}
    bs = trace.workload.config.block_size
    layers = trace.workload.hybrid()
    aligned = any(layer.state for layer in layers)
    started: set[str] = set()
    before = None  # the pool after the step before
    for step in trace.steps:
        reserved = set(step.after_schedule.reserved)
        for seq in step.scheduled:
            tables = (seq.block_table, *seq.groups)
            h, prompt = seq.num_cached, prompts[seq.name]
            if seq.name not in started and h > 0:
                for layer, its in zip(layers, seq.groups, strict=False):
                    if layer.state and set(its[h // bs - 1 : h // bs]) - reserved:
                        seen.add(STATE_HIT)
                    elif not layer.state and set(its[: h // bs]) - reserved:
                        seen.add(LAYER_HIT)
                if before is not None and h + bs < len(prompt):
                    cached = {b for _, b in before.cache_index}
                    longer = prompt[: h + bs]
                    if any(
                        owner.get(b) == 0 and before.blocks[b].token_ids == longer
                        for b in cached
                        if b < len(before.blocks)
                    ):
                        seen.add(LAYER_SHORTENED)
            if aligned and _split(trace, step, seq, prompt):
                seen.add(STATE_SPLIT)
            started.add(seq.name)
            for g, table in enumerate(tables):
                if g and reserved & set(table):
                    seen.add(LAYER_FREED)
                for b in set(table) - reserved:
                    if owner.setdefault(b, g) != g:
                        seen.add(LAYER_HANDED_ON)
                    owner[b] = g
        after = step.after_postprocess
        if after is not None:
            for name, status in after.status.items():
                if status == "WAITING" and not after.tables.get(name):
                    started.discard(name)
            before = after
    return seen


def _decodes(seq: Scheduled) -> bool:
    """A decode row: one position, the sequence's last, after a prompt's worth of it."""
    return seq.num_scheduled == 1 and seq.num_cached + 1 == len(seq.token_ids)


def _split(trace: EngineTrace, step: EngineStep, seq: Scheduled, prompt: tuple[int, ...]) -> bool:
    """Whether `seq`'s prefill chunk ends at a block boundary short of its prompt's end
    though the step had room for more (a state layer's aligned split)."""
    c = trace.workload.config
    end = seq.num_cached + seq.num_scheduled
    total = sum(s.num_scheduled for s in step.scheduled)
    return (
        end < len(prompt)
        and end % c.block_size == 0
        and total < c.max_num_batched_tokens
        and len(step.scheduled) <= c.max_num_seqs
    )


def observe(trace: EngineTrace) -> set[str]:
    """Which of the hard parts this run reached (read off the trace)."""
    seen: set[str] = set(_groups(trace)) if trace.workload.layers else set()
    prompts = {r.name: r.prompt for r in trace.workload.requests}
    bs = trace.workload.config.block_size
    if any(r.arrival > 1 for r in trace.workload.requests):
        seen.add(MID_RUN)
    if trace.workload.config.mode:
        seen.add(mode_label(trace.workload.config.mode))
    started: set[str] = set()
    previous = None
    drafting: set[str] = set()  # requests the previous step scheduled drafts for
    streamed: set[str] = set()  # requests whose client was sent output so far
    ran: set[str] = set()  # requests scheduled so far
    spaces = any(r.namespace for r in trace.workload.requests)
    embeds = any(r.embeds for r in trace.workload.requests)
    if trace.workload.config.policy not in ("fcfs", "priority"):
        seen.add(policy_label(trace.workload.config.policy))
    for step in trace.steps:
        if previous is not None:
            seen |= _between(trace, previous, step)
        seen |= _drafts(trace, step)
        if set(step.refused) - ran:  # a refusal of one that ran is E20's, no arrival's
            seen.add(REFUSED)
        if spaces and _apart(trace, step, ran, started, lambda a, b: a.namespace != b.namespace):
            seen.add(NAMESPACE_APART)
        if embeds and _apart(trace, step, ran, started, lambda a, b: a.embeds or b.embeds):
            seen.add(EMBEDS_APART)
        if previous is not None and _capped(trace, previous, step, started):
            seen.add(LOGPROBS_CAP)
        if at_limit(trace, step):
            seen.add(ADAPTERS_FULL)
        ran |= {seq.name for seq in step.scheduled}
        if step.is_prefill and len({_decodes(s) for s in step.scheduled}) == 2:
            seen.add(MIXED_STEP)
        for seq in step.scheduled:
            output = len(seq.token_ids) - len(prompts[seq.name])
            if step.is_prefill and seq.name not in started and seq.num_cached > 0:
                seen.add(PREFIX_HIT)
                if seq.num_cached >= (len(seq.token_ids) - 1) // bs * bs:
                    seen.add(WHOLE_PROMPT_HIT)
                freed: set[int] = set() if previous is None else {*previous.free, *previous.cached}
                if set(seq.block_table[: seq.num_cached // bs]) & freed:
                    seen.add(FREE_BLOCK_HIT)
            if step.is_prefill and seq.num_cached + seq.num_scheduled < len(seq.token_ids):
                seen.add(CHUNKED)
            if seq.name not in started and output > 0:  # its first chunk since preempted
                seen.add(REPREFILL)  # (a decode row in a mixed step has output too)
            started.add(seq.name)
        after = step.after_postprocess
        if after is not None:
            for name, status in after.status.items():
                if status == "WAITING" and name in started and not after.tables[name]:
                    seen.add(PREEMPTION)
                    if name in streamed:
                        seen.add(STREAMED_PREEMPTION)
                    if name in drafting:
                        seen.add(DRAFTS_PREEMPTED)
                    if trace.workload.config.policy == "priority":
                        seen.add(PRIORITY)
                    if trace.workload.config.retract_by_priority:
                        seen.add(RETRACTED_BY_PRIORITY)
                    started.discard(name)
            previous = after
        drafting = {seq.name for seq in step.scheduled if seq.drafts}
        streamed |= {name for name, _ in step.streamed}
    if any(s.step in trace.workload.early and s.scheduled for s in trace.steps):
        seen.add(EARLY)
    if trace.workload.layers and REPREFILL in seen:  # a hybrid model's request, re-prefilled
        seen.add(LAYER_REPREFILL)
    seen |= _transfers(trace)
    seen |= _session_labels(trace)
    seen |= _abort_points(trace)
    for request in trace.workload.requests:
        out = trace.outputs.get(request.name, ())
        if out and out[-1] == 0 and not request.ignore_eos:
            seen.add(EOS_FINISH)
        if request.ignore_eos and 0 in out[:-1]:
            seen.add(IGNORED_EOS)
        if out and out[-1] in request.stop and len(out) < request.max_tokens:
            seen.add(STOPPED)
        most = trace.workload.most(request)
        if most < request.max_tokens and len(out) == most and (out[-1] or request.ignore_eos):
            seen.add(CAPPED)
        alone = trace.workload.alone(request, trace.traits.turn_keeps_last)
        if request.abort and out != alone and trace.failure is None:
            seen.add(ABORTED)
    return seen
