"""Shape: a fork in vLLM v1's style (CodingPlatelets/nano-vllm-v1, tang-jiapeng/nano-vllm-v1,
laurxh/JK-infra). schedule() returns only the sequences, one mixed batch; each says how many
tokens it computes in `num_new_tokens`; postprocess(seqs, token_ids, seq_need_compute_logits)
gets tokens only for the sequences whose every token is now computed, with their indices;
a pickled copy carries every field (its runner reads token_ids for every sequence). The
correct engine, reshaped: it must pass under runner "mixed".
"""
# replaces nanovllm/engine/scheduler.py
# runner mixed

from typing import Any

from nanovllm.engine._correct_scheduler import Scheduler as _Correct
from nanovllm.engine.sequence import Sequence


def _getstate(self: Sequence) -> dict[str, Any]:
    return dict(vars(self))


def _setstate(self: Sequence, state: dict[str, Any]) -> None:
    vars(self).update(state)


Sequence.num_new_tokens = property(lambda self: self.num_scheduled_tokens)
Sequence.__getstate__ = _getstate
Sequence.__setstate__ = _setstate


class Scheduler(_Correct):
    def schedule(self) -> list[Sequence]:
        seqs, self._is_prefill = super().schedule()
        return seqs

    def postprocess(
        self, seqs: list[Sequence], token_ids: list[int], seq_need_compute_logits: list[int]
    ) -> None:
        tokens = [0] * len(seqs)  # a chunk that does not reach the end samples nothing
        for index, token in zip(seq_need_compute_logits, token_ids, strict=True):
            tokens[index] = token
        super().postprocess(seqs, tokens, self._is_prefill)
