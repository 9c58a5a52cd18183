"""A model that needs a GPU: its attention stores KV with a triton kernel and reads it with
flash-attention (never run here: schedcheck simulates the model)."""

import triton
import triton.language as tl
from flash_attn import flash_attn_varlen_func
from torch import nn


@triton.jit
def store_kvcache_kernel(key_ptr, value_ptr, slot_mapping_ptr, D: tl.constexpr):
    slot = tl.load(slot_mapping_ptr)
    if slot == -1:
        return


class ToyForCausalLM(nn.Module):
    def __init__(self, hf_config):
        super().__init__()
        self.embed = nn.Embedding(hf_config.vocab_size, hf_config.hidden_size)

    def forward(self, input_ids, positions):
        hidden = self.embed(input_ids)
        return flash_attn_varlen_func(hidden, hidden, hidden)

    def compute_logits(self, hidden):
        return hidden @ self.embed.weight.t()
