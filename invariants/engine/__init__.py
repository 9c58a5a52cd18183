"""What must hold of a real engine's scheduler (nano-vllm's API, docs/engines.md): the
workload it is driven with, the trace of plain values the driver copies out, the checks
E1-E8 on that trace, and the simulated KV cache behind E2."""
