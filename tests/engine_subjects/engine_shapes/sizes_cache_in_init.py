"""A correct runner that sizes its KV cache from torch.cuda's memory in `__init__` (as
AppleEgg-169's and pradsgit's do, under no name schedcheck leaves out), writes its count
into the Config and asserts it is positive: built on the CPU, and the pool stays the
workload's (issue 53)."""

# replaces nanovllm/engine/model_runner.py
import torch
from nanovllm.engine._correct_model_runner import ModelRunner as _ModelRunner


class ModelRunner(_ModelRunner):
    def __init__(self, config, rank, event):
        free, total = torch.cuda.mem_get_info()
        stats = torch.cuda.memory_stats()
        used = total - free + stats["allocated_bytes.all.peak"] + torch.cuda.memory_allocated()
        hf = config.hf_config
        block_bytes = 2 * hf.num_hidden_layers * config.kvcache_block_size * hf.hidden_size * 2
        memory = torch.cuda.get_device_properties(rank).total_memory
        config.num_kvcache_blocks = int(memory * 0.9 - used) // block_bytes
        assert config.num_kvcache_blocks > 0, "no memory left for the KV cache"
        self.cache = torch.zeros(config.num_kvcache_blocks, 1, device="cuda", pin_memory=True)
        super().__init__(config, rank, event)
