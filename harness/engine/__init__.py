"""How an engine is loaded and driven: nano-vllm's scheduling modules loaded by path with a
stub config (loader.py), driven step by step with a simulated model runner (drive.py)."""
