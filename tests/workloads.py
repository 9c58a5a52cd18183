"""Named workloads: the spec's worked examples as plain data, and a few made to expose a bug."""

from __future__ import annotations

from schedcheck.model.tokens import TokenModel
from schedcheck.model.workload import Config, Request, Workload
from schedcheck.strategies.examples import EXAMPLES as SPEC_EXAMPLES


def workload(
    num_blocks: int,
    block_size: int,
    max_num_seqs: int,
    budget: int,
    *requests: tuple[str, int, int],
    eos: int | None = None,
    model: TokenModel | None = None,
) -> Workload:
    """A workload from `(seq_id, prompt_len, max_tokens)` triples, all arriving at step 1."""
    return Workload(
        Config(num_blocks, block_size, max_num_seqs, budget, eos),
        tuple(Request(*r) for r in requests),
        model or TokenModel(),
    )


EXAMPLES = {name: w for name, w in SPEC_EXAMPLES.items() if name != "example0"}

# Example 2 with a third request held back by max_num_seqs = 2, too big for what a2's
# preemption frees: waiting is [a2, a3] after step 2, and head and tail differ.
PREEMPT_WITH_QUEUE = workload(3, 2, 2, 64, ("a1", 2, 3), ("a2", 3, 2), ("a3", 3, 1))

# a1 samples eos (token 0) as its second token.
EOS_SECOND = workload(100, 4, 8, 64, ("a1", 3, 4), eos=0, model=TokenModel(eos_at=(("a1", 1),)))
