"""The engine sets `config.eos` from its tokenizer after it has built the Scheduler, which
copied the Config's default (-1) when it was built: no sequence ever stops at eos
(HanehirogeTobou/nano-vllm 9e54150). Caught by E7."""

# replaces nanovllm/engine/llm_engine.py
from nanovllm.engine._correct_llm_engine import LLMEngine as _LLMEngine


class LLMEngine(_LLMEngine):
    def __init__(self, model, **kwargs):
        super().__init__(model, **kwargs)
        self.scheduler.eos = -1  # what Scheduler(config) read before config.eos was set
