"""jqzhang03/nano-vllm's loop with its progress bar: a step(), and a generate() that makes
a tqdm bar whatever `use_tqdm` says and sets per-run state its step reads. Where tqdm is
not installed schedcheck stands it in; the bar must then be a silent bar, not a
placeholder whose call ends generate() before its loop (a step() alone then read state
generate() never set: a false E6, found on 88f0ace)."""

# replaces nanovllm/engine/llm_engine.py
from nanovllm.engine._correct_llm_engine import LLMEngine as _LLMEngine
from tqdm.auto import tqdm


class LLMEngine(_LLMEngine):
    def step(self):
        assert self._collect_logits is False, "step() before generate() set its state"
        return _LLMEngine.step(self)

    def generate(self, prompts, sampling_params, use_tqdm=True):
        self._collect_logits = False
        bar = tqdm(total=len(prompts), desc="Generating", dynamic_ncols=True)
        for prompt in prompts:
            self.add_request(prompt, sampling_params)
        outputs = {}
        while not self.is_finished():
            for seq_id, token_ids in self.step():
                outputs[seq_id] = token_ids
                bar.update(1)
            bar.set_postfix({"done": len(outputs)})
        bar.close()
        return [outputs[seq_id] for seq_id in sorted(outputs)]
