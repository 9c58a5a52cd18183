"""A generate() that calls a stood-in package (the model hub) before its loop and sets
per-run state its step reads: generate() never reaches its loop here, and its step()
alone reads what generate() would have set. Not the engine's fault: no verdict (exit 2),
never E6."""

# replaces nanovllm/engine/llm_engine.py
import huggingface_hub
from nanovllm.engine._correct_llm_engine import LLMEngine as _LLMEngine


class LLMEngine(_LLMEngine):
    def step(self):
        assert self.per_run["generating"]
        return _LLMEngine.step(self)

    def generate(self, prompts, sampling_params, use_tqdm=True):
        huggingface_hub.login()  # a GPU machine's habit: schedcheck stands the hub in
        self.per_run = {"generating": True}
        for prompt in prompts:
            self.add_request(prompt, sampling_params)
        outputs = {}
        while not self.is_finished():
            for seq_id, token_ids in self.step():
                outputs[seq_id] = token_ids
        return [outputs[seq_id] for seq_id in sorted(outputs)]
