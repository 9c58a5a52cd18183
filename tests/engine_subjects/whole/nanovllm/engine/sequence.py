from copy import copy
from enum import Enum, auto
from itertools import count

from nanovllm.sampling_params import SamplingParams


class SequenceStatus(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


class Sequence:
    """One request: its tokens, its prefix-cache hit and its KV-cache block table.

    The generation before chunked prefill: a prefill computes from num_cached_tokens to
    the end in one step, a decode step computes only the last position, and
    num_cached_tokens is only the prefix-cache hit found when the blocks were allocated
    (steps do not advance it).
    """

    block_size = 256
    counter = count()

    def __init__(self, token_ids: list[int], sampling_params: SamplingParams | None = None):
        sampling_params = sampling_params or SamplingParams()
        self.seq_id = next(Sequence.counter)
        self.status = SequenceStatus.WAITING
        self.token_ids = copy(token_ids)
        self.last_token = token_ids[-1]
        self.num_tokens = len(self.token_ids)
        self.num_prompt_tokens = len(token_ids)
        self.num_cached_tokens = 0  # tokens found in the prefix cache at allocation
        self.block_table: list[int] = []
        # Set by schedule() when the sequence is scheduled for a prefill, cleared by
        # postprocess(): see _sends_all_tokens().
        self.prefilling = False
        self.temperature = sampling_params.temperature
        self.max_tokens = sampling_params.max_tokens
        self.ignore_eos = sampling_params.ignore_eos

    def __len__(self) -> int:
        return self.num_tokens

    def __getitem__(self, key):
        return self.token_ids[key]

    @property
    def is_finished(self) -> bool:
        return self.status == SequenceStatus.FINISHED

    @property
    def num_completion_tokens(self) -> int:
        return self.num_tokens - self.num_prompt_tokens

    @property
    def prompt_token_ids(self) -> list[int]:
        return self.token_ids[: self.num_prompt_tokens]

    @property
    def completion_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def num_cached_blocks(self) -> int:
        return self.num_cached_tokens // self.block_size

    @property
    def num_blocks(self) -> int:
        return (self.num_tokens + self.block_size - 1) // self.block_size

    @property
    def last_block_num_tokens(self) -> int:
        return self.num_tokens - (self.num_blocks - 1) * self.block_size

    def block(self, i: int) -> list[int]:
        """Token ids of logical block i."""
        assert 0 <= i < self.num_blocks
        return self.token_ids[i * self.block_size : (i + 1) * self.block_size]

    def append_token(self, token_id: int) -> None:
        self.token_ids.append(token_id)
        self.last_token = token_id
        self.num_tokens += 1

    def _sends_all_tokens(self) -> bool:
        # Workers need every token when this step computes more than the last position.
        # A decode step computes only position num_tokens - 1; a prefill computes from
        # num_cached_tokens to the end. In this generation num_cached_tokens is only the
        # prefix-cache hit and is not advanced by steps, so "num_cached_tokens <
        # num_tokens - 1" alone would also hold for every decode step (a decoding
        # sequence keeps its small hit). Nor does "no output yet" work: a sequence
        # preempted after it produced output is re-prefilled from its hit with its
        # outputs in the prompt. So schedule() marks a prefill explicitly (`prefilling`,
        # set for a prefill, cleared by postprocess(), carried in the pickled state so the
        # copy decodes the same way): a prefill's runner reads token_ids, even where it
        # computes only the last position.
        return self.prefilling

    def __getstate__(self):
        return (
            self.num_tokens,
            self.num_prompt_tokens,
            self.num_cached_tokens,
            self.block_table,
            self.prefilling,
            self.token_ids if self._sends_all_tokens() else self.last_token,
        )

    def __setstate__(self, state):
        (
            self.num_tokens,
            self.num_prompt_tokens,
            self.num_cached_tokens,
            self.block_table,
            self.prefilling,
            last,
        ) = state
        if isinstance(last, list):  # a prefill's copy: every token
            self.token_ids = last
            self.last_token = last[-1]
        else:  # a decode's: only the last one, which is all its runner reads
            self.token_ids = []
            self.last_token = last
