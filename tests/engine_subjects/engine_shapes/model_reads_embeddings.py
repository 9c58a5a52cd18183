"""A correct runner that reads its model's embedding table while it is built
(86MaxCao's `self.model.model.embed_tokens.weight.dtype`), which the simulated model does not
have: its own step cannot be built, and schedcheck's loop drives its scheduler instead,
saying so (issue 53)."""

# replaces nanovllm/engine/model_runner.py
from nanovllm.engine._correct_model_runner import ModelRunner as _ModelRunner


class ModelRunner(_ModelRunner):
    def __init__(self, config, rank, event):
        super().__init__(config, rank, event)
        self.dtype = self.model.model.embed_tokens.weight.dtype
