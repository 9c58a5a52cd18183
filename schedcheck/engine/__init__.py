"""Real engines' schedulers, checked (docs/engines.md): a core that names no engine and one
folder per engine's adapter.

The core, data flowing one way: workload.py (what a run is given) -> run.py, worker.py,
local.py, isolated.py (one run, here or in its box, on the skeleton a driver fills in) ->
trace.py, traits.py, runner.py (what the run showed, with the rules its adapter declared)
-> checks.py, kv.py, blocks.py (E1-E13) -> verdict.py, html.py (the report); strategies.py
and search.py draw and shrink workloads; command.py is `schedcheck engine`. adapter.py is
the protocol every engine implements, registry.py finds one by name. The adapters:
nanovllm/ (nano-vllm and its forks), vllm/ (vLLM's v1 scheduler).
"""
