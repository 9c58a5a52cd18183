"""The model runners of nano-vllm's generations and of its forks, read off their code
(docs/engines.md, "The model runner"): `--runner NAME` picks one, nanovllm/config.py's
detect_runner() reads which one a checkout has."""

from __future__ import annotations

from schedcheck.engine.runner import Runner

RUNNERS = {
    r.name: r
    for r in (
        Runner(
            "chunked",
            "num_cached_tokens",
            "count",
            "num_scheduled_tokens",
            False,
            "last-block",
            "nano-vllm f64d821 to bb823b3 (April 2026 on)",
        ),
        Runner(
            "chunked-clamped",
            "num_cached_tokens",
            "count",
            "num_scheduled_tokens",
            True,
            "last-block",
            "nano-vllm 8d63a98 to 25794a1 (the first chunked commits)",
        ),
        Runner(
            "whole",
            "num_cached_tokens",
            "rest",
            "",
            False,
            "last-block",
            "nano-vllm before 8d63a98 (9e8507e and earlier)",
        ),
        Runner(
            "mixed",
            "num_cached_tokens",
            "count",
            "num_new_tokens",
            False,
            "mixed",
            "forks in vLLM v1's style (prepare_model_input; CodingPlatelets/nano-vllm-v1 "
            "7ec374d, tang-jiapeng/nano-vllm-v1 a180672, laurxh/JK-infra b06f7d3)",
        ),
        Runner(
            "window",
            "scheduled_prefill_start",
            "end",
            "scheduled_prefill_end",
            False,
            "position",
            "shunwendongan/nano-vllm-online-serving 63ddd4f",
        ),
    )
}
NAMES = tuple(sorted(RUNNERS))
"""The runners a nano-vllm checkout can be driven with (`--runner`)."""

OWN = Runner(
    "own",
    "num_cached_tokens",
    "count",
    "num_scheduled_tokens",
    False,
    "position",
    "the fork's own ModelRunner: each step's rows as its prepare_* computed them and the "
    "simulated model read them",
)
"""A run through the fork's own step (--loop own): the rows are what its runner computed,
observed, not a rule's; its tensor-parallel copies are checked by a worker rank, not by E8
on a trace's pickled copies."""
