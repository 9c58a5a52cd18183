"""The token model behind sample_fn: pure, history-sensitive, eos anywhere, eos 0 included."""

from __future__ import annotations

import pytest

from schedcheck.model.tokens import TokenModel


def test_same_inputs_same_token() -> None:
    model = TokenModel(seed=3)
    assert model.next_token("a1", (4, 5), None) == TokenModel(seed=3).next_token("a1", (4, 5), None)


def test_the_next_token_depends_on_the_whole_history() -> None:
    model = TokenModel(seed=1, vocab_size=1000)
    histories = [(), (7,), (8,), (7, 7), (9, 7), (7, 9)]
    assert len({model.next_token("a1", h, None) for h in histories}) == len(histories)


def test_seed_and_seq_id_change_the_stream() -> None:
    streams = {
        TokenModel(seed=s, vocab_size=1000).generate(i, 8, None) for s in (0, 1) for i in ("a", "b")
    }
    assert len(streams) == 4


@pytest.mark.parametrize("eos", [0, 5, 99, 100])
def test_ordinary_tokens_are_never_eos(eos: int) -> None:
    model = TokenModel(vocab_size=100)
    tokens = [model.next_token(str(i), (j,), eos) for i in range(50) for j in range(20)]
    assert eos not in tokens and all(0 <= t <= 100 for t in tokens)


@pytest.mark.parametrize("position", [0, 1, 4])
def test_eos_at_forces_eos_at_that_position_even_eos_zero(position: int) -> None:
    model = TokenModel(eos_at=(("a1", position),))
    output = model.generate("a1", 10, 0)
    assert len(output) == position + 1 and output[-1] == 0 and 0 not in output[:-1]


def test_eos_per_mille_1000_ends_on_the_first_token() -> None:
    assert TokenModel(eos_per_mille=1000).generate("a1", 10, 7) == (7,)


def test_eos_rate_is_roughly_what_it_says() -> None:
    model = TokenModel(eos_per_mille=100)
    hits = sum(model.next_token(f"s{i}", (), 0) == 0 for i in range(5000))
    assert 350 < hits < 650


def test_without_eos_token_id_generate_runs_to_max_tokens() -> None:
    assert len(TokenModel(eos_per_mille=1000, eos_at=(("a1", 0),)).generate("a1", 6, None)) == 6


@pytest.mark.parametrize(("field", "value"), [("vocab_size", 0), ("eos_per_mille", 1001)])
def test_bad_model_parameters_are_refused(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=field):
        TokenModel(**{field: value})


def test_a_long_run_s_keys_give_each_request_its_own_stream_as_a_short_one_s_do() -> None:
    """Thousands of keys are looked up in a dict (a marathon's), a handful scanned: the
    same tokens either way, the first pair of a name winning, a name without one keyed by
    its crc32."""
    pairs = (*((f"r{i}", 1000 + i) for i in range(40)), ("r3", 7))
    long = TokenModel(keys=pairs)
    for seq_id in ("r0", "r3", "r39", "nobody"):
        short = TokenModel(keys=tuple(p for p in pairs if p[0] == seq_id)[:1])
        assert long.generate(seq_id, 8, None) == short.generate(seq_id, 8, None)
    assert long._key("r3") == 1003 and TokenModel()._key("x") == long._key("x")
