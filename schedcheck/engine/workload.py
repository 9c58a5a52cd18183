"""An engine workload: a config, requests over a tiny vocabulary, and the token function.

The simulated model's next token is a deterministic function of the whole sequence so far
(prompt and output), so every request's output is fixed by its own tokens alone: what it
produces with preemption, chunking and prefix sharing must equal what it produces run
alone (E7). eos is token 0; the vocabulary is 1..vocab, small so that prompts share
prefixes and the prefix cache is hit often.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from schedcheck.engine.layers import Layer
from schedcheck.model.workload import blocks_for

EOS = 0
DRAFTERS = {
    "lookup": "a lookup in the request's own tokens (n-gram, suffix): no KV of its own",
    "model": "a draft model with a forward pass of its own, writing its drafts' KV",
    "hidden": "a draft head on the target's hidden states (EAGLE, EAGLE-3, MTP), writing "
    "its drafts' KV",
}
"""The kinds of proposer a workload's drafts come from, as the scheduler sees them: one
whose forward pass writes the KV of the drafts it proposes after a step needs KV slots
past the step's last position (vLLM's lookahead slots; E17), one that looks its drafts up
needs none."""
DRAFT_VOCAB = 256  # the token ids a draft may take: the simulated model's vocabulary
CONNECTORS = {
    "simulated": "schedcheck's connector over the simulated external store: the engine's "
    "connector interface implemented by schedcheck, its worker side played by the simulated "
    "runner",
    "offloading": "the engine's own offloading connector, to an offload tier of "
    "`offload_blocks` blocks: what it stores, finds and evicts is the engine's code; its "
    "worker side, the jobs that move KV, played by the simulated runner",
}
"""The KV connectors a workload may run with (issue 50): what stands between the engine's
scheduler and an external KV store (disaggregated prefill, offloading)."""
LOAD_FAILURES = ("recompute", "fail")  # what the engine does with a load that failed
POLICIES = {
    "fcfs": "first come, first served",
    "priority": "a priority per request, lower first (then first come); where the engine "
    "preempts for priority (EngineConfig.preempt_gap), a waiting request preempts running "
    "ones whose priority is worse by more than the gap",
    "lpm": "the longest prefix the cache holds first (SGLang's lpm)",
    "dfs-weight": "depth-first over the prefix tree, the heaviest subtree first (SGLang's "
    "dfs-weight)",
    "lof": "the longest output asked for first (SGLang's lof)",
    "hrrn": "the highest response ratio next: the tokens prefilled since a request arrived "
    "over those it has left to prefill (SGLang's hrrn)",
    "shortest-prefill-first": "the fewest tokens left to prefill first, what the cache "
    "holds counted as done (SGLang's shortest-prefill-first)",
    "random": "the waiting requests in a random order each step, the server's seed fixed "
    "(SGLang's random)",
    "routing-key": "the waiting requests whose routing key (EngineRequest.routing_key) the "
    "running requests hold most first (SGLang's routing-key)",
}
"""The scheduling policies a workload may ask for (EngineConfig.policy): the order in which
waiting requests are admitted. An engine's features say which it has."""


@dataclass(frozen=True)
class EngineConfig:
    """The fields of nano-vllm's Config that its scheduler reads (vLLM's SchedulerConfig and
    CacheConfig hold the same four, and a policy)."""

    num_blocks: int  # num_kvcache_blocks (vLLM: num_gpu_blocks, its null block included)
    block_size: int  # kvcache_block_size
    max_num_seqs: int
    max_num_batched_tokens: int
    policy: str = "fcfs"  # vLLM's scheduling policy: "fcfs" or "priority" (nano-vllm: fcfs)
    # How the engine runs, in its adapter's words (vLLM: "async-v2", "sync-v1", ...: its
    # scheduling and the model runner's protocol); "" the mode its run is set up with.
    mode: str = ""
    # vLLM's max_model_len where it caps requests below their max_tokens (each ends when
    # its sequence reaches it: FINISHED_LENGTH_CAPPED); 0: the longest any request grows
    max_model_len: int = 0
    # SGLang's schedule_conservativeness: how much of a running request's remaining output
    # its admission reserves (below 1, requests are admitted that a decode may have to
    # retract)
    conservativeness: float = 1.0
    # the most requests the waiting queue holds (0: no limit); an arrival that finds it
    # full is refused (SGLang's max_queued_requests), and only an arrival (E20)
    max_queued: int = 0
    # a step may compute a prefill chunk beside the running requests' decodes, where the
    # engine makes that a choice (SGLang's enable_mixed_chunk; vLLM always does)
    mixed: bool = False
    # under the priority policy, a waiting request preempts running requests whose priority
    # is worse than its own by more than this (SGLang's
    # priority_scheduling_preemption_threshold); -1: no preemption for priority
    preempt_gap: int = -1
    # under the priority policy, retraction takes the worst priority first, then as ever
    # (SGLang's --retraction-policy priority; its default, length, reads no priority) (E14)
    retract_by_priority: bool = False
    # the server serves LoRA adapters (EngineRequest.adapter), at most this many distinct
    # in one step's batch (SGLang's max_loras_per_batch, vLLM's max_loras); 0: none (E25)
    max_adapters: int = 0


@dataclass(frozen=True)
class Headroom:
    """What an engine's intake asks of its pool for a request beyond the KV of the request's
    own tokens: a request that asks more is clipped or refused by the engine's design, so
    it is no valid input for it. Zero: none (nano-vllm, vLLM). SGLang's: its allocator
    clips max_new_tokens to the pool less the prompt rounded up to a page, a page and one
    slot (`max_new_tokens_for_memory`), and it refuses a prompt of the pool less 6 slots or
    more (`validate_input_length`: `max_req_input_len` is the pool less 6)."""

    pages: int = 0  # pages on top of the prompt (rounded up to a page) and its output
    tokens: int = 0  # slots on top of those
    prompt: int = 0  # slots a prompt needs beyond its own (0: no such rule)

    def slots(self, prompt: int, max_tokens: int, block_size: int) -> int:
        """The pool's slots a request of `prompt` tokens and `max_tokens` needs."""
        if self == NO_HEADROOM:
            return prompt + max_tokens - 1  # its last sampled token is never computed
        rounded = -(-prompt // block_size) * block_size
        need = rounded + max_tokens + self.pages * block_size + self.tokens
        return max(need, prompt + self.prompt)


NO_HEADROOM = Headroom()


@dataclass(frozen=True)
class EngineRequest:
    name: str  # r1, r2, ... in the order they are added
    prompt: tuple[int, ...]
    max_tokens: int
    ignore_eos: bool = False
    arrival: int = 1  # added at the start of this step
    # vLLM's: what nano-vllm's workloads leave at these defaults
    priority: int = 0  # lower runs first under the priority policy
    stop: tuple[int, ...] = ()  # stop_token_ids: the request ends after sampling one
    abort: int = 0  # aborted at the start of this step, if not finished by then (0: never)
    # the abort lands while that step runs: an engine core that takes aborts eagerly (vLLM's
    # aborts_queue) applies it just before the step's update, and again after it
    abort_in_step: bool = False
    # A KV connector's transfers (issue 50; a workload with a `connector`): its external
    # prefix hit loaded synchronously (0: within the step that schedules it) or
    # asynchronously, the worker reporting it done `load` steps after it started; the
    # blocks of each load of it (counted from the load's first) that fail to load; and
    # whether its KV is saved when it finishes (0: not), the worker reporting the save done
    # `save` steps after it started (its blocks held till then)
    load: int = 0
    load_fails: tuple[int, ...] = ()
    save: int = 0
    # the lookups of it the connector answers "not yet" (it needs more time to know its
    # hit: vLLM's None) before it answers
    lookup_wait: int = 0
    # A streaming-input session (issue 50): the continuation chunks its client sends under
    # the same request, each (the step it is sent at, its tokens), every turn asking
    # max_tokens; and the step its client closes it at (0: with its last chunk). A request
    # with chunks is a session; one without, a request as ever.
    chunks: tuple[tuple[int, tuple[int, ...]], ...] = ()
    close: int = 0
    # its client is streamed each token as it comes (SGLang's `stream`); without, an
    # engine may hold the output back until the request ends
    stream: bool = False
    # the cache namespace it is sent under ("": the shared one): a request may read cached
    # KV only where a request of its own namespace wrote it (SGLang's `extra_key`, which
    # namespaces its radix tree; vLLM's `cache_salt` is of the same kind) (E23)
    namespace: str = ""
    # the client asks the logprobs of its prompt from this position on (-1: none): the
    # engine computes every prompt position from there, whatever its cache holds (SGLang's
    # `return_logprob` with `logprob_start_len`, which caps a prefix hit there) (E24)
    logprobs_from: int = -1
    # the LoRA adapter it is served with ("": the base model), where the server serves
    # adapters (EngineConfig.max_adapters): the KV it computes is its adapter's, read only
    # by requests of its adapter (E23, as its namespace), and a step runs requests of at
    # most max_adapters adapters (E25) (SGLang's `lora_id`, vLLM's `lora_request`)
    adapter: str = ""
    # its client's routing key ("": none), which the routing-key policy groups requests by
    # (SGLang's `routing_key`)
    routing_key: str = ""
    # its prompt carries embeddings of its own at some positions beside its token ids
    # (SGLang's `positional_embed_overrides`): its KV is not its tokens' alone, so it
    # reads no cached KV another request computed and lends none (E23, as a namespace of
    # its own)
    embeds: bool = False

    @property
    def session(self) -> bool:
        return bool(self.chunks)

    @property
    def closed_at(self) -> int:
        """The step its close is sent at (a session's)."""
        return self.close or (self.chunks[-1][0] if self.chunks else 0)

    def sends(self) -> tuple[tuple[int, tuple[int, ...] | None], ...]:
        """What a session's client sends, in order: each chunk at its step, then its close
        (None) at `closed_at`; nothing at a step after its client aborted it (vLLM's output
        processor aborts a late chunk's request: a stream once ended stays so)."""
        if not self.session:
            return ()
        said = (*self.chunks, (self.closed_at, None))
        return tuple(
            (step, chunk) for step, chunk in said if not (self.abort and self.abort < step)
        )

    @property
    def total(self) -> int:
        """The most tokens its sequence holds: its prompt, its chunks and every turn's
        output (each turn's last token dropped from the next's context: a bound)."""
        turns = 1 + len(self.chunks)
        return len(self.prompt) + sum(len(c) for _, c in self.chunks) + turns * self.max_tokens

    def peak_blocks(self, block_size: int, headroom: Headroom = NO_HEADROOM) -> int:
        """The most KV it holds (its last sampled token is never computed), or where the
        engine's intake asks more (`headroom`), what it asks; a session's, over every turn."""
        if self.session:  # its last turn's context is at most all but that turn's output
            context = self.total - self.max_tokens
            return blocks_for(headroom.slots(context, self.max_tokens, block_size), block_size)
        return blocks_for(headroom.slots(len(self.prompt), self.max_tokens, block_size), block_size)


@dataclass(frozen=True)
class EngineWorkload:
    config: EngineConfig
    requests: tuple[EngineRequest, ...]
    vocab: int = 2
    eos_per_16: int = 2  # how often the model says eos: crc % 16 < eos_per_16
    # steps at whose start the prefix cache is cleared with the running requests preempted
    # (vLLM's reset_prefix_cache(reset_running_requests=True)), for an engine that has it
    resets: tuple[int, ...] = ()
    # steps whose batch the device finishes before the engine core looks (async scheduling:
    # an engine core that asks updates it at once; one that does not, never looks)
    early: tuple[int, ...] = ()
    # speculative decoding (issue 49): the draft tokens the proposer makes a step for each
    # request (vLLM's num_speculative_tokens; 0: none), and how often a draft misses (per 8)
    drafts: int = 0
    draft_miss_per_8: int = 0
    # what proposes them (DRAFTERS): a lookup in the tokens, or a forward pass of its own
    # that writes its drafts' KV past the step's last position (E17)
    drafter: str = "lookup"
    # dynamic draft lengths: (batch sizes from, to, drafts), the first from 1; a step of a
    # batch size in a range is followed by that many drafts, capped at `drafts` (vLLM's
    # num_speculative_tokens_per_batch_size); empty: `drafts` after every step
    draft_schedule: tuple[tuple[int, int, int], ...] = ()
    # a KV connector (issue 50; CONNECTORS; "": none), the prompts whose KV its external
    # store holds from the start (a prefill node's, an earlier server's: any prefix of one
    # is a hit), and what the engine does with a failed load (LOAD_FAILURES)
    connector: str = ""
    stored: tuple[tuple[int, ...], ...] = ()
    load_failure: str = "recompute"
    # the offload tier's size in blocks (connector "offloading": the engine's own offloading
    # connector; it starts empty). A request's `load` and `save` are then the steps each
    # of its load and store jobs takes (at least 1, ending at a step's start)
    offload_blocks: int = 0
    # a hybrid model (issue 51; layers.py): the kinds of layer it has beside full
    # attention, each a KV cache group of its own ("window:W", "chunk:C", "mamba"); empty:
    # a model of full attention alone
    layers: tuple[str, ...] = ()

    def hybrid(self) -> tuple[Layer, ...]:
        """Its layers beside full attention (layers.py)."""
        return tuple(Layer.parse(t) for t in self.layers)

    def next_token(self, tokens: Sequence[int]) -> int:
        """The simulated model: a function of the whole sequence, the same in every process."""
        h = zlib.crc32(",".join(map(str, tokens)).encode())
        return EOS if h % 16 < self.eos_per_16 else 1 + (h >> 4) % self.vocab

    def propose(self, tokens: Sequence[int], most: int | None = None) -> tuple[int, ...]:
        """The simulated proposer's drafts after `tokens` (an n-gram lookup, a draft model,
        EAGLE: whichever the engine runs, its drafts as the scheduler sees them): up to
        `drafts` tokens, each the model's own next token unless it misses (then a token the
        model would not give, and what follows it from there); now and then fewer than
        asked, or none, as an n-gram lookup that finds no match. A function of the sequence,
        as next_token is: the same in every process and every run. `most`: the drafts the
        engine asks for this step (a dynamic draft length), a prefix of the same chain."""
        if not self.drafts:
            return ()
        h = zlib.crc32(("draft:" + ",".join(map(str, tokens))).encode())
        if h % 8 == 0:
            return ()  # no match
        count = self.drafts if h % 8 > 1 else 1 + (h >> 3) % self.drafts
        count = count if most is None else min(count, most)
        chain, out = list(tokens), []
        for i in range(count):
            right = self.next_token(chain)
            missed = (h >> (8 + 3 * i)) % 8 < self.draft_miss_per_8
            token = (right + 1 if right < DRAFT_VOCAB - 1 else right - 1) if missed else right
            chain.append(token)
            out.append(token)
        return tuple(out)

    def drafts_after(self, batch: int) -> int:
        """The drafts proposed after a step of `batch` requests: its range's count in the
        draft schedule (a batch size between ranges or past the last takes the range
        before it, as vLLM's dense lookup does), capped at `drafts`; `drafts` without one."""
        count = self.drafts
        for start, _, drafts in self.draft_schedule:
            if start <= batch:
                count = min(drafts, self.drafts)
        return count

    def verify(self, tokens: Sequence[int], drafts: Sequence[int]) -> tuple[int, ...]:
        """What a step that computes `tokens`' last position and `drafts` after it samples,
        verified as greedy rejection sampling does: the drafts the model agrees with, up to
        the first it does not, then one token of its own (the model's at that position).
        So speculative decoding never changes a token (E7)."""
        chain, out = list(tokens), []
        for draft in drafts:
            token = self.next_token(chain)
            out.append(token)
            if token != draft:
                return tuple(out)
            chain.append(token)
        out.append(self.next_token(chain))
        return tuple(out)

    def most(self, request: EngineRequest) -> int:
        """The most tokens it may produce: max_tokens, less where max_model_len caps its
        sequence first (vLLM's check_stop: FINISHED_LENGTH_CAPPED once the sequence holds
        max_model_len tokens)."""
        return min(request.max_tokens, self.max_model_len() - len(request.prompt))

    def alone(self, request: EngineRequest, keeps_last: bool = False) -> tuple[int, ...]:
        """Its output run alone: ample blocks, no preemption, no sharing (E7); a session's,
        every turn's output in turn (what its client is streamed)."""
        return tuple(t for turn in self.turns(request, keeps_last) for t in turn)

    def turns(
        self, request: EngineRequest, keeps_last: bool = False
    ) -> tuple[tuple[int, ...], ...]:
        """Each turn's output run alone (`histories`' outputs)."""
        return tuple(out for _, out in self.histories(request, keeps_last))

    def histories(
        self, request: EngineRequest, keeps_last: bool = False
    ) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
        """Each turn run alone: (the context it starts from, its output). A session's next
        turn continues from its context so far, its last turn's output but the last token
        (sampled, never computed: vLLM drops it, `_update_request_as_session`) and the
        chunk: C' = C + O[:-1] + chunk; or, where the engine keeps that token
        (`keeps_last`: Traits.turn_keeps_last, SGLang's), C' = C + O + chunk. A turn ends
        as a request does (eos, a stop token, max_tokens, max_model_len over the whole
        sequence). A request that is no session has one turn, from its prompt."""
        context, turns = tuple(request.prompt), list[tuple[tuple[int, ...], tuple[int, ...]]]()
        for chunk in (None, *(c for _, c in request.chunks)):
            if chunk is not None:
                last = turns[-1][1]
                context = (*context, *(last if keeps_last else last[:-1]), *chunk)
            cap = min(request.max_tokens, self.max_model_len() - len(context))
            tokens, out = list(context), list[int]()
            while len(out) < max(cap, 1):
                token = self.next_token(tokens)
                tokens.append(token)
                out.append(token)
                if (token == EOS and not request.ignore_eos) or token in request.stop:
                    break
            turns.append((context, tuple(out)))
        return tuple(turns)

    @property
    def lookahead(self) -> int:
        """The KV slots past a step's last position its drafter writes, at most. A step
        computing positions up to e samples its next token at e + 1 at most (all drafts
        accepted). A draft model then computes that token and its drafts but the last, one
        position each: KV at e + 1 .. e + drafts. A head on the target's hidden states
        (EAGLE, MTP) computes its first draft on the step's own positions (KV at those) and
        each further one a position on: KV at e + 1 .. e + drafts - 1. A lookup writes
        none. (vLLM reserves `drafts` for both: `num_lookahead_tokens`.)"""
        if not self.drafts or self.drafter == "lookup":
            return 0
        return self.drafts if self.drafter == "model" else self.drafts - 1

    def draft_blocks(self, request: EngineRequest) -> int:
        """The most KV blocks `request` holds alone with its drafts: its tokens but the last
        sampled (never computed), the draft positions (or padded rows) computed after its
        last known one, and its drafter's slots after those (E17)."""
        return blocks_for(
            len(request.prompt) + request.max_tokens - 1 + self.drafts + self.lookahead,
            self.config.block_size,
        )

    def longest(self) -> int:
        """The longest any of its sequences grows (prompt and every output token): the
        max_model_len it runs with."""
        return max(
            (r.total if r.session else len(r.prompt) + r.max_tokens for r in self.requests),
            default=1,
        )

    def max_model_len(self) -> int:
        """The max_model_len it runs with: its config's, or the longest sequence it can
        grow."""
        return self.config.max_model_len or self.longest()

    def problems(
        self,
        reserved: int = 0,
        headroom: Headroom = NO_HEADROOM,
        smallest_block: int = 2,
        budget_in_blocks: bool = False,
        state_budget: bool = False,
    ) -> list[str]:
        """Why this is not valid input for an engine (empty when it is): a request that
        cannot fit alone, or a token budget below max_num_seqs (a decode step may
        schedule max_num_seqs tokens whatever the budget, as nano-vllm's does).
        `reserved`: blocks the engine keeps out of play (vLLM's null block: 1); `headroom`:
        what its intake asks beyond a request's tokens; `smallest_block`: the smallest block
        (page) size it runs with; `budget_in_blocks`: its token budget must be a whole number
        of blocks; `state_budget`: a model with a state layer runs with a budget of a block
        at least."""
        c = self.config
        found = [
            f"{r.name} needs {r.peak_blocks(c.block_size, headroom)} KV blocks, more than "
            f"num_blocks {c.num_blocks}" + (f" less {reserved} reserved" if reserved else "")
            for r in self.requests
            if r.peak_blocks(c.block_size, headroom) > c.num_blocks - reserved
        ]
        if not 0 <= self.drafts <= 8:
            found.append(f"drafts {self.drafts} is not a count of draft tokens from 0 to 8")
        if not 0 <= self.draft_miss_per_8 <= 8:
            found.append(f"draft_miss_per_8 {self.draft_miss_per_8} is not from 0 to 8")
        found.extend(self._schedule_problems())
        found.extend(self._connector_problems())
        found.extend(self._session_problems())
        found.extend(self._hybrid_problems(reserved, state_budget))
        if self.drafter not in DRAFTERS:
            found.append(f"drafter {self.drafter!r} is none of {', '.join(DRAFTERS)}")
        if self.drafts:  # a lone request's drafts past its last token take KV slots too
            found.extend(
                f"{r.name} with {self.drafts} draft tokens needs {self.draft_blocks(r)} KV "
                f"blocks, more than num_blocks {c.num_blocks}"
                + (f" less {reserved} reserved" if reserved else "")
                for r in self.requests
                if self.draft_blocks(r) > c.num_blocks - reserved
            )
        if c.max_model_len:
            found.extend(
                f"{r.name}'s prompt of {len(r.prompt)} tokens leaves no room for an output "
                f"under max_model_len {c.max_model_len} (vLLM's input processor refuses it "
                "before its scheduler sees it)"
                for r in self.requests
                if len(r.prompt) >= c.max_model_len
            )
            room = (c.num_blocks - reserved) * c.block_size
            if c.max_model_len > room:
                found.append(
                    f"max_model_len {c.max_model_len} is over the {room} tokens the pool holds "
                    "(vLLM refuses to start so)"
                )
        if c.policy not in POLICIES:
            found.append(f"policy {c.policy!r} is none of {', '.join(POLICIES)}")
        if c.max_queued < 0:
            found.append(f"max_queued {c.max_queued} is not a count of requests (0: no limit)")
        found.extend(
            f"{r.name}'s logprobs_from {r.logprobs_from} is not a position of its prompt of "
            f"{len(r.prompt)} tokens (-1: none)"
            for r in self.requests
            if not -1 <= r.logprobs_from <= len(r.prompt)
        )
        found.extend(
            f"{r.name}'s namespace {r.namespace!r} is not a short name of letters and digits"
            for r in self.requests
            if r.namespace and not (len(r.namespace) <= 16 and r.namespace.isalnum())
        )
        found.extend(
            f"{r.name}'s adapter {r.adapter!r} is not a name of 1 to 7 letters and digits"
            for r in self.requests
            if r.adapter
            and not (len(r.adapter) <= 7 and r.adapter.isascii() and r.adapter.isalnum())
        )
        found.extend(
            f"{r.name}'s routing_key {r.routing_key!r} is not a short name of letters and digits"
            for r in self.requests
            if r.routing_key and not (len(r.routing_key) <= 16 and r.routing_key.isalnum())
        )
        if not 0 <= c.max_adapters <= 8:
            found.append(f"max_adapters {c.max_adapters} is not a count from 0 (none) to 8")
        if any(r.adapter for r in self.requests) and not c.max_adapters:
            found.append("a request under a LoRA adapter, but max_adapters 0 (none served)")
        if c.preempt_gap < -1:
            found.append(f"preempt_gap {c.preempt_gap} is below -1 (no preemption for priority)")
        if c.retract_by_priority and c.policy != "priority":
            found.append(
                f"retract_by_priority under policy {c.policy!r}: retraction reads priorities "
                "under the priority policy alone"
            )
        if c.block_size < smallest_block:
            found.append(
                f"kvcache_block_size {c.block_size} is below {smallest_block}, which this "
                "engine never runs with (docs/engines.md)"
            )
        if budget_in_blocks and c.max_num_batched_tokens % c.block_size:
            found.append(
                f"max_num_batched_tokens {c.max_num_batched_tokens} is not a whole number of "
                f"blocks of {c.block_size} (the engine's launcher refuses it)"
            )
        if c.max_num_batched_tokens < c.max_num_seqs:
            found.append(
                f"max_num_batched_tokens {c.max_num_batched_tokens} is below "
                f"max_num_seqs {c.max_num_seqs}"
            )
        return found

    def _schedule_problems(self) -> list[str]:
        """Why draft_schedule is not one an engine takes: ranges of batch sizes, the first
        from 1, in order and apart, each a count of drafts up to `drafts`."""
        found, last = [], 0
        for entry in self.draft_schedule:
            start, end, count = entry
            if start <= last or end < start or not 0 <= count <= self.drafts:
                found.append(
                    f"draft_schedule entry {list(entry)} is not a range of batch sizes after "
                    f"{last} with 0 to {self.drafts} drafts"
                )
            last = max(last, end)
        if self.draft_schedule and (self.draft_schedule[0][0] != 1 or not self.drafts):
            found.append(
                f"draft_schedule {[list(e) for e in self.draft_schedule]} must start at batch "
                "size 1, and only a workload with drafts has one"
            )
        return found

    def _session_problems(self) -> list[str]:
        """Why a request's chunks and close are not what a client sends: chunks of tokens,
        sent in order from its arrival on, closed at or after the last."""
        found = []
        for r in self.requests:
            steps = [s for s, _ in r.chunks]
            if r.close and not r.chunks:
                found.append(f"{r.name} has a close at step {r.close} but no chunks")
            if steps != sorted(steps) or any(s < r.arrival for s in steps):
                found.append(
                    f"{r.name}'s chunks {steps} are not sent in order from step {r.arrival}"
                )
            if any(not c or any(t < 0 for t in c) for _, c in r.chunks):
                found.append(f"{r.name} has an empty chunk, or one of negative tokens")
            if r.close and steps and r.close < steps[-1]:
                found.append(f"{r.name} is closed at step {r.close}, before its last chunk")
        return found

    def _connector_problems(self) -> list[str]:
        """Why its connector fields are not ones a run takes."""
        found = []
        if self.connector and self.connector not in CONNECTORS:
            found.append(f"connector {self.connector!r} is none of {', '.join(CONNECTORS)}")
        if self.load_failure not in LOAD_FAILURES:
            found.append(
                f"load_failure {self.load_failure!r} is none of {', '.join(LOAD_FAILURES)}"
            )
        uses = bool(self.stored) or any(
            r.load or r.load_fails or r.save or r.lookup_wait for r in self.requests
        )
        if uses and not self.connector:
            found.append("stored prefixes, loads or saves without a connector")
        if (self.connector == "offloading") != bool(self.offload_blocks):
            found.append(
                f"offload_blocks {self.offload_blocks} with connector {self.connector!r}: "
                "an offload tier is the offloading connector's, and it has one"
            )
        if not 0 <= self.offload_blocks <= 64:
            found.append(f"offload_blocks {self.offload_blocks} is not from 0 to 64")
        if self.connector == "offloading":  # what it loads and when is the engine's to say
            found.extend(
                f"{what} under the offloading connector (the engine's own decides them)"
                for what, there in (
                    ("stored prefixes", bool(self.stored)),
                    ("failing loads", any(r.load_fails for r in self.requests)),
                    ("lookups answered 'not yet'", any(r.lookup_wait for r in self.requests)),
                )
                if there
            )
        found.extend(
            f"{r.name}'s {field} {value} is not a count of steps from 0 to 8"
            for r in self.requests
            for field, value in (
                ("load", r.load),
                ("save", r.save),
                ("lookup_wait", r.lookup_wait),
            )
            if not 0 <= value <= 8
        )
        found.extend(
            f"{r.name}'s load_fails {list(r.load_fails)} are not distinct block indices from 0"
            for r in self.requests
            if len(set(r.load_fails)) != len(r.load_fails) or any(i < 0 for i in r.load_fails)
        )
        found.extend(
            f"stored prefix {list(p)} is not a token list of 1 to 64 tokens"
            for p in self.stored
            if not 0 < len(p) <= 64 or any(t < 0 for t in p)
        )
        return found

    def hybrid_blocks(self) -> int:
        """The blocks a hybrid model's pool needs beside those reserved: a request of
        max_model_len in every KV cache group at once, a block more each."""
        each = -(-self.max_model_len() // self.config.block_size) + 1
        return (1 + len(self.layers)) * each

    def _hybrid_problems(self, reserved: int, state_budget: bool = False) -> list[str]:
        """A hybrid model's layers (layers.py), each kind once; its pool holds a request of
        max_model_len in every KV cache group at once, a block more each (an engine's
        startup check asks it: vLLM's planner)."""
        found, kinds = [], []
        for text in self.layers:
            try:
                layer = Layer.parse(text)
            except ValueError as e:
                found.append(str(e))
                continue
            if layer.size > 64:
                found.append(f"layer {text!r}: its size {layer.size} is more than 64 tokens")
            kinds.append(layer.kind)
        if len(set(kinds)) != len(kinds):
            found.append(f"layers {list(self.layers)} name a kind twice: one layer of each kind")
        c = self.config
        budget = (
            [
                f"max_num_batched_tokens {c.max_num_batched_tokens} is below "
                f"kvcache_block_size {c.block_size}, which this engine refuses for a model "
                "with a Mamba layer (its align mode's start-up check)"
            ]
            if state_budget and "mamba" in kinds and c.max_num_batched_tokens < c.block_size
            else []
        )
        if "mamba" in kinds and self.drafts:
            found.append(
                f"layers {list(self.layers)} with drafts {self.drafts}: a Mamba layer's "
                "states under speculative decoding (a block per draft) are not modelled"
            )
        if found or not self.layers:
            return found + budget
        each = -(-self.max_model_len() // c.block_size) + 1
        need = self.hybrid_blocks()
        if c.num_blocks - reserved >= need:
            return budget
        return [
            f"num_blocks {c.num_blocks} less {reserved} reserved holds no request of "
            f"max_model_len {self.max_model_len()} in each of its {1 + len(self.layers)} KV "
            f"cache groups ({need} blocks, {each} a group)",
            *budget,
        ]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineWorkload:
        requests = tuple(
            EngineRequest(
                str(r["name"]),
                tuple(map(int, r["prompt"])),
                int(r["max_tokens"]),
                bool(r["ignore_eos"]),
                int(r["arrival"]),
                int(r.get("priority", 0)),
                tuple(map(int, r.get("stop", ()))),
                int(r.get("abort", 0)),
                bool(r.get("abort_in_step", False)),
                int(r.get("load", 0)),
                tuple(map(int, r.get("load_fails", ()))),
                int(r.get("save", 0)),
                int(r.get("lookup_wait", 0)),
                tuple((int(s), tuple(map(int, c))) for s, c in r.get("chunks", ())),
                int(r.get("close", 0)),
                bool(r.get("stream", False)),
                str(r.get("namespace", "")),
                int(r.get("logprobs_from", -1)),
                str(r.get("adapter", "")),
                str(r.get("routing_key", "")),
                bool(r.get("embeds", False)),
            )
            for r in data["requests"]
        )
        config = data["config"]
        return cls(
            EngineConfig(
                int(config["num_blocks"]),
                int(config["block_size"]),
                int(config["max_num_seqs"]),
                int(config["max_num_batched_tokens"]),
                str(config.get("policy", "fcfs")),
                str(config.get("mode", "")),
                int(config.get("max_model_len", 0)),
                float(config.get("conservativeness", 1.0)),
                int(config.get("max_queued", 0)),
                bool(config.get("mixed", False)),
                int(config.get("preempt_gap", -1)),
                bool(config.get("retract_by_priority", False)),
                int(config.get("max_adapters", 0)),
            ),
            requests,
            int(data["vocab"]),
            int(data["eos_per_16"]),
            tuple(map(int, data.get("resets", ()))),
            tuple(map(int, data.get("early", ()))),
            int(data.get("drafts", 0)),
            int(data.get("draft_miss_per_8", 0)),
            str(data.get("drafter", "lookup")),
            tuple(_entry(e) for e in data.get("draft_schedule", ())),
            str(data.get("connector", "")),
            tuple(tuple(map(int, p)) for p in data.get("stored", ())),
            str(data.get("load_failure", "recompute")),
            int(data.get("offload_blocks", 0)),
            tuple(map(str, data.get("layers", ()))),
        )

    @classmethod
    def from_json(cls, text: str) -> EngineWorkload:
        return cls.from_dict(json.loads(text))


def _entry(data: Any) -> tuple[int, int, int]:
    start, end, count = data
    return int(start), int(end), int(count)
