"""A decode computes its last token at position len(seq), one past where it is (nano-vllm
before f5b4840, PR #67, "correct position indexing to be 0-based", and the forks taken
from it): its rotary embedding is off by one. Caught by E1."""

# replaces nanovllm/engine/model_runner.py
from nanovllm.engine._correct_model_runner import ModelRunner as _ModelRunner


class ModelRunner(_ModelRunner):
    def prepare_decode(self, seqs):
        input_ids, positions = super().prepare_decode(seqs)
        return input_ids, positions + 1
