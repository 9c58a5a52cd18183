"""nano-vllm and its forks: the adapter `schedcheck engine --engine nanovllm` uses."""
