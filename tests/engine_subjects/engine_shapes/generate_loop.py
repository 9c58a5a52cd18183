"""An engine loop of another shape: no step() (its generate() calls step_once()), and a
generate() that sets per-run state its step reads (as jqzhang03/nano-vllm's does): it
can only be driven through its generate()."""

# replaces nanovllm/engine/llm_engine.py
from nanovllm.engine._correct_llm_engine import LLMEngine as _LLMEngine


class LLMEngine(_LLMEngine):
    step = None  # its loop's step is step_once(), which only generate() calls

    def step_once(self):
        assert self.per_run["generating"], "step_once() outside generate()"
        return _LLMEngine.step(self)

    def generate(self, prompts, sampling_params, use_tqdm=True):
        self.per_run = {"generating": True}
        for prompt in prompts:
            self.add_request(prompt, sampling_params)
        outputs = {}
        while not self.is_finished():
            for seq_id, token_ids in self.step_once():
                outputs[seq_id] = token_ids
        self.per_run = {"generating": False}
        return [outputs[seq_id] for seq_id in sorted(outputs)]
