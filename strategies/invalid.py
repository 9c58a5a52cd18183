"""Strategies for what the reference must refuse: malformed values and infeasible requests.

Submissions are never given these (the contract asks no validation); they test the
reference's own ValueErrors.
"""

from __future__ import annotations

from hypothesis import strategies as st

from schedcheck.model.workload import Config

# Not a positive int: zero and negatives, bools (an int subclass, but a bug here), floats
# (even integral ones), strings, None and containers.
NOT_POSITIVE_INTS: st.SearchStrategy[object] = st.one_of(
    st.integers(max_value=0),
    st.booleans(),
    st.floats(allow_nan=True),
    st.text(max_size=3),
    st.none(),
    st.lists(st.integers(1, 3), max_size=2),
)

NOT_SEQ_IDS: st.SearchStrategy[object] = st.one_of(
    st.just(""), st.integers(), st.none(), st.binary(min_size=1, max_size=3)
)

NOT_EOS_IDS: st.SearchStrategy[object] = st.one_of(
    st.booleans(), st.floats(), st.text(max_size=3), st.lists(st.integers(), max_size=1)
)


@st.composite
def infeasible_requests(draw: st.DrawFn, config: Config) -> tuple[int, int]:
    """(prompt_len, max_tokens) that could never finish alone under `config`:
    ceil((prompt_len + max_tokens - 1) / block_size) > num_blocks."""
    capacity = config.num_blocks * config.block_size
    max_tokens = draw(st.integers(1, capacity + 4))
    least = max(1, capacity - max_tokens + 2)  # prompt_len + max_tokens - 1 > capacity
    prompt_len = draw(st.integers(least, least + 8))
    return prompt_len, max_tokens
