"""A kernel module a runner imports inside a call, not at import (engine_shapes/
runner_habits.py): it needs flash_attn, which schedcheck stands in for."""

from flash_attn import flash_attn_with_kvcache


def paged_attention(q, k_cache, v_cache, block_table):
    return flash_attn_with_kvcache(q, k_cache, v_cache, block_table=block_table)
