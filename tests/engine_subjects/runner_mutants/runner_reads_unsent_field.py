"""The runner reads a sequence's `seq_id`, which its pickled copy does not carry
(`__getstate__` sends the counts, the table and the tokens): every tensor-parallel worker
fails on its first prefill (HGinkgo/LLM-Serve's and brightmoonflame's chunked runner).
Caught by E8."""

# replaces nanovllm/engine/model_runner.py
from nanovllm.engine._correct_model_runner import ModelRunner as _ModelRunner


class ModelRunner(_ModelRunner):
    def prepare_prefill(self, seqs):
        self.last_ids = [seq.seq_id for seq in seqs]
        return super().prepare_prefill(seqs)
