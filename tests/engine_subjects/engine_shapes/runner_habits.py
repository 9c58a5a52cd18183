"""A correct runner with habits forks have (niwehao's, pradsgit's, IceCreamMilkyTea's):
it names the default process group (`dist.group.WORLD`), moves its model (`.cuda()`,
`.eval()`), and imports a kernel module inside a call, which imports a GPU package."""

# replaces nanovllm/engine/model_runner.py
import torch.distributed as dist
from nanovllm.engine._correct_model_runner import ModelRunner as _ModelRunner


class ModelRunner(_ModelRunner):
    def run(self, seqs, is_prefill):
        from nanovllm.layers.paged_attention import paged_attention  # noqa: F401

        self.group = dist.group.WORLD
        self.model = self.model.cuda().eval()
        return super().run(seqs, is_prefill)
