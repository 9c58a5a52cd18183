"""vLLM's v1 scheduler and KV cache manager as an engine (docs/engines.md, "vLLM").

vLLM's own `Scheduler` is built on the CPU from a config with no model weights
(build.py), driven step by step with the same simulated model runner and token function as
nano-vllm's (drive.py), and its state copied out into the engine trace the checks read.
"""
