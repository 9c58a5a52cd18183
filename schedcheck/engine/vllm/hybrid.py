"""A hybrid model's KV cache config for vLLM (issue 51): the workload's layers
(engine/layers.py) as vLLM's layer specs, one full-attention layer and one layer of each
other kind, laid out into KV cache groups by vLLM's own planner, as its engine core lays
out a model's (`get_kv_cache_configs` and, from 0.34, `get_global_kv_cache_groups` in
`v1/core/kv_cache_planning.py`; before, in `v1/core/kv_cache_utils.py`; then
`generate_scheduler_kv_cache_config`), never by hand: the groups, their order and the
pool's size are the ones vLLM would choose.

A Mamba layer runs in vLLM's "align" mode, the one its prefix caching runs (a state kept
at block boundaries, prefills split there: `Scheduler._mamba_block_aligned_split`), its
blocks of the attention layers' size and its page padded to theirs, as vLLM's platform
lays a real hybrid Mamba model out (`_align_hybrid_block_size`). schedcheck's model has no
Mamba layer of its own, so the model's config hook that sets the mode
(`MambaModelConfig.verify_and_update_config`) is not run: the mode and the Mamba block
size are set here, before the planner and the Scheduler read them.

The hybrid KV cache manager is on, as on a GPU and on vLLM's CPU platform: a machine whose
vLLM build finds no device of its own gets an `UnspecifiedPlatform`, which turns it off in
VllmConfig, and nothing past the planner reads the switch (`disable_hybrid_kv_cache_manager`
is read in `get_kv_cache_groups` only).
"""

from __future__ import annotations

from typing import Any

from schedcheck.engine.layers import Layer
from schedcheck.engine.workload import EngineWorkload

__all__ = ["LayoutRefused", "hybrid_config"]


class LayoutRefused(RuntimeError):
    """vLLM's planner refused a layout its own start-up rule accepts (every group holds a
    request of max_model_len: the workload's validation asks that, and a block more each):
    raised where the Scheduler is built, inside the run's call, so it is E6 at build (a
    finding of the release's, issue 51), not a usage error."""


FULL = "layer.0"  # the full-attention layer's name; the others' "layer.1", ...


def hybrid_config(
    workload: EngineWorkload,
    vllm_config: Any,
    full_spec: Any,
    refused: type[Exception],
    vllm: Any,
) -> tuple[Any, tuple[int, ...]]:
    """vLLM's KVCacheConfig for the workload's model, and the group of each layer in the
    workload's order (full attention's first). `vllm`: the release's names, imported before
    any box (Build: its SlidingWindowSpec, ChunkedLocalAttentionSpec, MambaSpec, kv_cache_utils and,
    0.34 on, kv_cache_planning). `refused`: raised, with vLLM's words, where the release
    says it does not lay out a kind (NotImplementedError), or lays the layers out otherwise
    than a group a layer; LayoutRefused where its planner refuses a layout it should take."""
    kv_cache_utils, planning = vllm.kv_cache_utils, vllm.kv_cache_planning
    c = workload.config
    specs: dict[str, Any] = {FULL: full_spec}
    for i, layer in enumerate(workload.hybrid(), start=1):
        specs[f"layer.{i}"] = _spec(layer, full_spec, vllm)
    vllm_config.scheduler_config.disable_hybrid_kv_cache_manager = False
    cache = vllm_config.cache_config
    if any(layer.state for layer in workload.hybrid()):
        cache.mamba_cache_mode = "align"  # prefix caching's (the hook's, from 0.29 always)
        cache.mamba_block_size = c.block_size
    if hasattr(cache, "get_resolved_kv_cache_layout") and cache.kv_cache_layout is None:
        cache.kv_cache_layout = "LBNHC"  # (0.29 on) the engine core's, for default backends
    memory = c.num_blocks * max(s.page_size_bytes for s in specs.values())
    try:
        if planning is not None:  # 0.34: grouping is a step of its own
            groups = planning.get_global_kv_cache_groups(vllm_config, [specs])
            configs = planning.get_kv_cache_configs(vllm_config, [specs], [memory], groups)
        else:
            configs = kv_cache_utils.get_kv_cache_configs(vllm_config, [specs], [memory])
    except NotImplementedError as e:  # a kind the release says it does not lay out
        raise refused(f"vLLM does not lay out {list(workload.layers)}: {_said(e)}") from None
    except (ValueError, AssertionError) as e:  # a valid layout refused: the release's bug
        raise LayoutRefused(
            f"vLLM's planner refuses the layout {['full', *workload.layers]} over "
            f"{c.num_blocks} blocks of {c.block_size} (max_model_len {c.max_model_len}), "
            f"which holds a request of max_model_len in every group: {_said(e)}"
        ) from None
    config = kv_cache_utils.generate_scheduler_kv_cache_config(configs)
    owner = {
        name: g for g, group in enumerate(config.kv_cache_groups) for name in group.layer_names
    }
    order = tuple(owner[name] for name in specs)
    if len(set(order)) != len(order) or order[0] != 0 or config.num_blocks != c.num_blocks:
        raise refused(
            f"vLLM laid out the layers {list(specs)} into groups {order} of "
            f"{config.num_blocks} blocks: schedcheck plays a group a layer, full "
            f"attention's first, of {c.num_blocks} blocks"
        )
    return config, order


def _said(e: BaseException) -> str:
    """The first line of what vLLM said, or its exception's name."""
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


def _spec(layer: Layer, full: Any, vllm: Any) -> Any:
    """The layer's vLLM spec, its page the full-attention layer's (one pool)."""
    base = {
        "block_size": full.block_size,
        "num_kv_heads": full.num_kv_heads,
        "head_size": full.head_size,
        "dtype": full.dtype,
    }
    if layer.kind == "window":
        return vllm.SlidingWindowSpec(**base, sliding_window=layer.size)
    if layer.kind == "chunk":
        return vllm.ChunkedLocalAttentionSpec(**base, attention_chunk_size=layer.size)
    # a state of one number, its page padded to attention's (0.22 asserts equal pages)
    return vllm.MambaSpec(
        block_size=full.block_size,
        shapes=((1,),),
        dtypes=(full.dtype,),
        page_size_padded=full.page_size_bytes,
        mamba_cache_mode="align",
    )
