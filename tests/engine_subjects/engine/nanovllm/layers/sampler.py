import torch
from torch import nn


class Sampler(nn.Module):
    @torch.compile
    def forward(self, logits: torch.Tensor, temperatures: torch.Tensor):
        probs = torch.softmax(logits.float().div_(temperatures.unsqueeze(dim=1)), dim=-1)
        return probs.div_(torch.empty_like(probs).exponential_(1).clamp_min_(1e-10)).argmax(-1)
