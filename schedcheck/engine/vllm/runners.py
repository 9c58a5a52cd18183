"""vLLM's GPU model runner, simulated from the SchedulerOutputs alone: the v1 runner and the
v2 runner, each in sync and in async mode (docs/engines.md, "vLLM's modes").

A runner on a worker process receives nothing but SchedulerOutputs, so the simulation
keeps its own state from them as the real one does, and never reads the scheduler's
Request objects: a scheduler that sends too little is caught because the runner computes
on what it was sent. Per request it keeps a block table, the position its computation
starts at, and its own copy of the tokens; per step it computes the positions
`num_computed_tokens .. + num_scheduled_tokens - 1` and samples a token where the step
reaches the end of what it holds (a prefill chunk short of it is discarded).

What each runner holds, read in vLLM's code (0.33, `vllm/v1/worker/gpu_model_runner.py`
and `vllm/v1/worker/gpu/model_runner.py`):

- v1 keeps every request it was sent (`self.requests`) and a persistent batch of those
  scheduled in the previous step; one left out of a step leaves the batch, and when it
  comes back (or is resumed after preemption) it is re-added from its cached state. In
  async mode its CPU copy holds -1 for each token it sampled (`_bookkeeping_sync`): the
  value stays on the device, and only the last position of a request of the previous batch
  reads it (`prev_sampled_token_ids` in `_prepare_input_ids`). A request re-added in async
  mode recovers its outputs from `all_token_ids[-num_output_tokens:]`, which the scheduler
  sends for a request not scheduled in the previous step (`_update_states`).
- v2 keeps a request from the step it is sent as new until it finishes or is preempted
  (`finish_requests` drops both); a resumed request is sent as new, its tokens in
  `prefill_token_ids` (`add_requests`); the tokens it samples stay in its own state, so it
  holds real values in both modes. It discards a sample where the step ends short of the
  tokens it was given (`prefill_len`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from schedcheck.engine.trace import UNKNOWN, Copy

__all__ = ["PROTOCOLS", "Executed", "ModelRunner", "Sample", "ShortOutput"]


class ShortOutput(Exception):
    """A SchedulerOutput without what the runner reads: vLLM's runner would raise (a
    KeyError in its own dicts), so the engine crashes on it (E6, named in words)."""


class Executed(NamedTuple):
    """One step computed: per scheduled request (in the output's order) what it computed
    on, the tokens sampled from that (one; with drafts, those verified and one of the
    model's own), and whether the sample is kept (not a chunk short of the end)."""

    copies: tuple[Copy, ...]
    sampled: tuple[tuple[int, ...], ...]
    kept: tuple[bool, ...]


ROW = 8  # a request's row of drafts in the v2 runner: num_speculative_tokens at most

Sample = Callable[[str, Copy, int], tuple[int, ...]]
"""The model's tokens for a request after a step computed `Copy.token_ids` at its positions,
the last `drafts` of them drafts to verify (the driver's: the positions before them are
read from the KV cache, which E2 checks)."""


def _drafts(out: Any, name: str) -> list[int]:
    """The draft tokens the step schedules for `name` (speculative decoding), computed after
    its own tokens."""
    return [int(t) for t in out.scheduled_spec_decode_tokens.get(name, ())]


class ModelRunner(Protocol):
    def receive(self, out: Any) -> list[str]:
        """Take a SchedulerOutput as the runner does before it computes: the scheduled
        requests' names, in the order of num_scheduled_tokens."""
        ...

    def execute(self, order: list[str], out: Any, sample: Sample) -> Executed:
        """Compute the step just received; `sample` is the simulated model's next token
        after what a request computed on."""
        ...

    def held(self, name: str) -> tuple[int, ...]:
        """The tokens it holds for `name` (what its proposer drafts from)."""
        ...

    keeps_drafts: bool
    """Whether it computes on drafts it keeps itself (v2), not on those the SchedulerOutput
    sends (v1): its scheduler is sent placeholders (-1) for them."""

    def propose(self, name: str, drafts: tuple[int, ...] | None, width: int) -> None:
        """After a step of `name`'s: keep the drafts its proposer made (None: none, a
        prefill chunk short of its end) and the step's draft width (where keeps_drafts)."""
        ...

    def drafting(self) -> dict[str, int]:
        """The requests it holds drafts for (where keeps_drafts), in the order it got them,
        each with the draft width of its last step (what it tells the scheduler)."""
        ...


class _Runner:
    """What both runners keep per request."""

    keeps_drafts = False

    def __init__(self, overlapped: bool) -> None:
        self.overlapped = overlapped
        self.drafts: dict[str, tuple[int, ...]] = {}  # its proposer's, where it keeps them
        self.tables: dict[str, list[int]] = {}
        self.tokens: dict[str, list[int]] = {}
        self.starts: dict[str, int] = {}

    def propose(self, name: str, drafts: tuple[int, ...] | None, width: int) -> None:
        """v1 keeps none: the engine core hands them to the scheduler, which sends them."""

    def drafting(self) -> dict[str, int]:
        return {}

    def _own_drafts(self, out: Any, name: str) -> list[int]:
        """The drafts a step computes for `name`: as many as the SchedulerOutput schedules,
        taken from its own; a row its proposer never wrote holds 0 (zeroed when added), a
        position past what it proposed -1 (vLLM's n-gram speculator fills it with the last
        token: either is a draft the sampler rejects unless the model agrees, so the value
        only changes how many are accepted)."""
        count = len(out.scheduled_spec_decode_tokens.get(name, ()))
        own = self.drafts.get(name, ())
        return [*own[:count], *[UNKNOWN] * (count - len(own))]

    def held(self, name: str) -> tuple[int, ...]:
        """The tokens it holds for `name` (what its proposer drafts from)."""
        return tuple(self.tokens.get(name, ()))

    def forget(self, name: str) -> None:
        self.tables.pop(name, None)
        self.tokens.pop(name, None)
        self.starts.pop(name, None)

    def known(self, name: str, what: str) -> list[int]:
        if name not in self.tokens:
            raise ShortOutput(f"{name} is scheduled as {what}, but the runner was never sent it")
        return self.tokens[name]

    def compute(
        self, name: str, inputs: list[int], n: int, sample: Sample, drafts: list[int]
    ) -> tuple[Copy, tuple[int, ...]]:
        """The step computed on `inputs` (the request's tokens as the runner holds them) and
        the drafts after them."""
        inputs = [*inputs, *drafts]
        copy = Copy(
            tuple(inputs),
            inputs[-1] if inputs else None,
            self.starts[name],
            n,
            tuple(self.tables.get(name, ())),
            len(self.tokens[name]) + len(drafts),
        )
        return copy, sample(name, copy, len(drafts))


class V1Runner(_Runner):
    """vLLM's v1 GPUModelRunner (`_update_states`, `_prepare_input_ids`, `_bookkeeping_sync`).

    With drafts under async scheduling (0.22.1's `use_async_spec_decode`) it keeps its
    proposer's drafts on the device (the scheduler is sent -1 placeholders, as to v2) and
    corrects the scheduler's optimistic position of a request of the previous batch by the
    drafts that batch rejected (`prev_num_draft_len`, `correct_spec_decode_token_counts`:
    `num_computed_tokens -= optimistic - accepted`, read off the device's
    `valid_sampled_token_count`); one that was not in it needs none (its update has
    landed). The position its last own token is at reads the device's sample."""

    def __init__(self, overlapped: bool) -> None:
        super().__init__(overlapped)
        self.keeps_drafts = overlapped  # async: its own drafts, the scheduler's are -1s
        self.prompts: dict[str, int] = {}  # prompt length per request
        self.batch: set[str] = set()  # the persistent batch: scheduled in the previous step
        self.previous: dict[str, int] = {}  # on the device: the previous batch's samples
        self.rejected: dict[str, int] = {}  # async: the previous batch's drafts rejected

    def forget(self, name: str) -> None:
        super().forget(name)
        self.batch.discard(name)
        self.previous.pop(name, None)
        self.drafts.pop(name, None)
        self.rejected.pop(name, None)

    def propose(self, name: str, drafts: tuple[int, ...] | None, width: int) -> None:
        """Async mode: the drafts its proposer made on the device for `name` after a step."""
        if self.overlapped and name in self.tokens and drafts is not None:
            self.drafts[name] = drafts

    def receive(self, out: Any) -> list[str]:
        for name in out.finished_req_ids:
            self.forget(name)
        cached = out.scheduled_cached_reqs
        resumed = _resumed(cached)
        scheduled = set(out.num_scheduled_tokens)
        previous_batch = set(self.batch)
        self.batch &= scheduled - resumed  # unscheduled ones leave the batch, kept cached
        # one that leaves the batch leaves the device's map too (InputBatch.remove_request)
        self.previous = {n: t for n, t in self.previous.items() if n in self.batch}
        # its count of the previous batch's rejected drafts applies to that batch only
        rejected, self.rejected = self.rejected, {}
        for new in out.scheduled_new_reqs:
            # prefill_token_ids (not in 0.11): the prompt, and a resumed request's outputs
            prompt = getattr(new, "prefill_token_ids", None) or new.prompt_token_ids
            self.tables[new.req_id] = list(new.block_ids[0])
            self.tokens[new.req_id] = list(prompt)
            self.prompts[new.req_id] = len(new.prompt_token_ids)
            self.starts[new.req_id] = new.num_computed_tokens
            self.batch.add(new.req_id)
        for i, name in enumerate(cached.req_ids):
            tokens = self.known(name, "a cached request")
            blocks = cached.new_block_ids[i]
            if name in resumed:
                self.tables[name] = list(blocks[0]) if blocks is not None else []
            elif blocks is not None:
                self.tables.setdefault(name, []).extend(blocks[0])
            self.starts[name] = cached.num_computed_tokens[i]
            if name in previous_batch and name not in resumed:  # corrected on the device
                self.starts[name] -= rejected.get(name, 0)
            sent = getattr(cached, "all_token_ids", {})  # not in 0.11.0
            if self.overlapped:
                self._recover(name, tokens, cached, i)
            elif name in sent:
                self.tokens[name] = list(sent[name])
            self.batch.add(name)
        return [str(name) for name in out.num_scheduled_tokens]

    def _recover(self, name: str, tokens: list[int], cached: Any, i: int) -> None:
        """Async mode: outputs beyond num_output_tokens are dropped; a request coming back
        into the batch takes its outputs from all_token_ids. 0.11.0 sends neither: its
        runner keeps its own copy as it is (-1 for each token sampled in async mode,
        `_update_states` updating no token on the last rank), so nothing is recovered."""
        if not hasattr(cached, "num_output_tokens"):
            return
        prompt, outputs = self.prompts[name], cached.num_output_tokens[i]
        del tokens[prompt + outputs :]
        if name not in self.batch and outputs > 0:
            sent = cached.all_token_ids.get(name)
            if sent is None:
                raise ShortOutput(
                    f"{name} comes back into the runner's batch with {outputs} output "
                    "token(s), but the SchedulerOutput sends no all_token_ids for it"
                )
            tokens[prompt:] = list(sent)[-outputs:]

    def execute(self, order: list[str], out: Any, sample: Sample) -> Executed:
        copies, sampled, kept, counts = [], [], [], []
        for name in order:
            n = int(out.num_scheduled_tokens[name])
            drafts = self._own_drafts(out, name) if self.keeps_drafts else _drafts(out, name)
            inputs = list(self.tokens[name])
            own = self.starts[name] + n - len(drafts)  # its own tokens end here, drafts after
            if drafts:
                inputs = [*inputs[:own], *[UNKNOWN] * (own - len(inputs))]
            if name in self.previous:  # its last own token's input is on the device
                last = own - 1
                inputs.extend([UNKNOWN] * (last + 1 - len(inputs)))
                inputs[last] = self.previous[name]
            copy, tokens = self.compute(name, inputs, n, sample, drafts)
            copies.append(copy)
            sampled.append(tokens)
            kept.append(own >= len(self.tokens[name]) or bool(drafts))
            counts.append(len(drafts))
        self.previous = {}
        for name, tokens, keep, k in zip(order, sampled, kept, counts, strict=True):
            if keep:
                self.tokens[name].extend([UNKNOWN] * len(tokens) if self.overlapped else tokens)
                if self.overlapped:
                    self.previous[name] = tokens[-1]
                    self.rejected[name] = k + 1 - len(tokens)
        return Executed(tuple(copies), tuple(sampled), tuple(kept))


class V2Runner(_Runner):
    """vLLM's v2 GPU model runner (`finish_requests`, `add_requests`, `update_requests`,
    `post_update`). Its state is its own: the position a request's next step starts at
    (`req_states.num_computed_tokens`, set when the request is added, then advanced by each
    step's count less the drafts it rejected; a cached request's num_computed_tokens from
    the scheduler only updates a CPU mirror, which async scheduling with drafts makes
    optimistic), and its drafts (`req_states.draft_tokens`, zeroed when the request is
    added, written by its proposer after each step): a step scheduling k draft positions
    for a request computes the first k of those, whatever the SchedulerOutput holds there
    (-1 placeholders: the scheduler is only told how many, `DraftTokensHandler`)."""

    keeps_drafts = True

    def __init__(self, overlapped: bool) -> None:
        super().__init__(overlapped)
        self.prefill: dict[str, int] = {}  # prefill_len: the tokens it was given
        self.drafts: dict[str, tuple[int, ...]] = {}  # its proposer's, by request
        self.widths: dict[str, int] = {}  # the draft width of each one's last step

    def forget(self, name: str) -> None:
        super().forget(name)
        self.prefill.pop(name, None)
        self.drafts.pop(name, None)
        self.widths.pop(name, None)

    def propose(self, name: str, drafts: tuple[int, ...] | None, width: int) -> None:
        if name in self.tokens:
            self.widths[name] = width
            if drafts is not None:
                self.drafts[name] = drafts

    def drafting(self) -> dict[str, int]:
        return {name: self.widths.get(name, 0) for name in self.drafts}

    def receive(self, out: Any) -> list[str]:
        preempted = getattr(out, "preempted_req_ids", None) or set()
        for name in {*out.finished_req_ids, *preempted}:
            self.forget(name)
        for new in out.scheduled_new_reqs:
            # taken when received: the list is the Request's own, which grows after
            tokens = list(new.prefill_token_ids)
            self.tables[new.req_id] = list(new.block_ids[0])
            self.tokens[new.req_id] = tokens
            self.prefill[new.req_id] = len(tokens)
            self.starts[new.req_id] = new.num_computed_tokens
            self.drafts[new.req_id] = (0,) * ROW  # its row zeroed
        cached = out.scheduled_cached_reqs
        for i, name in enumerate(cached.req_ids):
            self.known(name, "a cached request")
            blocks = cached.new_block_ids[i]
            if blocks is not None:
                self.tables.setdefault(name, []).extend(blocks[0])
        return [str(name) for name in out.num_scheduled_tokens]

    def execute(self, order: list[str], out: Any, sample: Sample) -> Executed:
        copies, sampled, kept, used = [], [], [], []
        for name in order:
            n = int(out.num_scheduled_tokens[name])
            drafts = self._own_drafts(out, name)
            copy, tokens = self.compute(name, list(self.tokens[name]), n, sample, drafts)
            copies.append(copy)
            sampled.append(tokens)
            kept.append(self.starts[name] + n >= self.prefill[name])
            used.append(len(drafts))
        for name, tokens, keep, count in zip(order, sampled, kept, used, strict=True):
            n = int(out.num_scheduled_tokens[name])
            rejected = 0
            if keep:  # written after the positions computed (its own, not the drafts)
                end = self.starts[name] + n
                del self.tokens[name][end - count :]
                self.tokens[name].extend(tokens)
                rejected = count - (len(tokens) - 1)
            self.starts[name] += n - rejected  # post_update: query_len - num_rejected
        return Executed(tuple(copies), tuple(sampled), tuple(kept))


def _resumed(cached: Any) -> set[str]:
    """The cached requests resumed from preemption: a set of ids from 0.12 on, a flag per
    request in 0.11."""
    ids = getattr(cached, "resumed_req_ids", None)
    if ids is not None:
        return {str(n) for n in ids}
    flags = getattr(cached, "resumed_from_preemption", ())
    return {str(n) for n, flag in zip(cached.req_ids, flags, strict=False) if flag}


PROTOCOLS: dict[str, Callable[[bool], ModelRunner]] = {"v1": V1Runner, "v2": V2Runner}
"""The simulated runner of each protocol, built with whether steps overlap (async mode)."""
