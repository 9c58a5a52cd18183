"""What an engine's adapter declares of its runs, carried by every trace: the checks, the
workloads and the report read these, never an engine's name (docs/engines.md, "Another
engine")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schedcheck.engine.runner import Runner

__all__ = ["Traits"]


@dataclass(frozen=True)
class Traits:
    """One engine's rules, as data: a trace saved with them is checked without the engine."""

    runner: Runner  # which positions a step computes, which fields a worker reads (E1, E2, E8)
    # A block's hash names its whole prefix, and the prefix cache keeps an index of hashes
    # that must agree with the blocks (vLLM): E3 checks the index, E2 the KV it promises.
    hashes_name_prefixes: bool = False
    update_call: str = "postprocess()"  # the step's second call, as the reports name it
    # input rows a drafter adds to the step's token budget for each request scheduled (vLLM
    # 0.34's max_num_new_slots_for_drafting: a draft model keeps one unsliced token), read
    # off the engine's config for the run: a step with no room for them has no room (E13)
    draft_inputs: int = 0
    # the token budget its scheduler schedules within, where the engine sets it below the
    # configured max_num_batched_tokens (vLLM 0.2x with a draft model: less one row per
    # max_num_seqs, `max_num_scheduled_tokens`); 0: the configured one (E13)
    token_budget: int = 0
    # a step's draft positions count against its token budget (vLLM's num_scheduled_tokens
    # holds them); where not, a decode counts as its one token however many drafts it
    # verifies (SGLang: chunked_prefill_size bounds extends, and a mixed step takes one
    # token a decode off it; the decode batch is bounded by max_running_requests) (E4)
    drafts_in_budget: bool = True
    # a session's next turn continues from its last turn's whole output (SGLang: a new
    # request of its session, `Session.create_req` appending `output_ids`); without, from
    # all of it but its last sampled token, never computed (vLLM's
    # `_update_request_as_session`) (E7, E14)
    turn_keeps_last: bool = False
    # the base model takes one of a step's adapter slots (SGLang: its LoRA pool holds the
    # base as an adapter of its own, `validate_lora_batch` counting None); without, only
    # adapters count (vLLM's max_loras) (E25)
    base_is_adapter: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "runner": self.runner.to_dict(),
            "hashes_name_prefixes": self.hashes_name_prefixes,
            "update_call": self.update_call,
            "draft_inputs": self.draft_inputs,
            "token_budget": self.token_budget,
            "drafts_in_budget": self.drafts_in_budget,
            "turn_keeps_last": self.turn_keeps_last,
            "base_is_adapter": self.base_is_adapter,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Traits:
        return cls(
            Runner.from_dict(data["runner"]),
            bool(data["hashes_name_prefixes"]),
            str(data["update_call"]),
            int(data.get("draft_inputs", 0)),
            int(data.get("token_budget", 0)),
            bool(data.get("drafts_in_budget", True)),
            bool(data.get("turn_keeps_last", False)),
            bool(data.get("base_is_adapter", False)),
        )
