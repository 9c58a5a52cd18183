"""A decode feeds the token before the last one (the input taken from the sequence as it
was a step earlier): the row computes a token its sequence does not hold at that position.
Caught by E2, or by E8 where its tokens are alike (a worker's copy of a decoding sequence
has no token_ids)."""

# replaces nanovllm/engine/model_runner.py
import torch
from nanovllm.engine._correct_model_runner import ModelRunner as _ModelRunner


class ModelRunner(_ModelRunner):
    def prepare_decode(self, seqs):
        _, positions = super().prepare_decode(seqs)
        return torch.tensor([seq.token_ids[-2] for seq in seqs], dtype=torch.int64), positions
