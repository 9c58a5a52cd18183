"""Bug: a pickled sequence carries its tokens only while it has produced none.

The fork kept the rule of the generation before chunked prefill ("prefill = no output
yet"). Symptom: a sequence preempted after it produced output is re-prefilled, and the
tensor-parallel workers receive only its last token. Caught by E8.
"""
# replaces nanovllm/engine/sequence.py

from nanovllm.engine._correct_sequence import Sequence as _Correct
from nanovllm.engine._correct_sequence import SequenceStatus  # noqa: F401


class Sequence(_Correct):
    def _in_prefill(self) -> bool:
        return self.num_completion_tokens == 0  # the bug: a re-prefill has output
