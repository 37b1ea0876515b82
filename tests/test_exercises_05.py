"""Notebook 05's exercises: ``embed_tokens`` and ``residual_sublayer``.

The reference passes, each buggy variant fails with its hint, an untouched stub is "not attempted
yet", and the references agree with the modules the course builds (helpers/layers.py, model.py).
"""

import math

import pytest
import torch

from helpers.exercises import EXERCISES, check, embed_tokens, residual_sublayer
from helpers.layers import EncoderLayer, FeedForward, LayerNorm
from helpers.model import Transformer
from helpers.positional import sinusoidal_encoding

NAMES = ["embed_tokens", "residual_sublayer"]


def run(capsys, name, fn):
    ok = check(name, fn)
    return ok, capsys.readouterr().out


@pytest.mark.parametrize("name", NAMES)
def test_reference_passes(capsys, name):
    ok, out = run(capsys, name, EXERCISES[name].reference)
    assert ok is True
    assert out.startswith(f"✅ {name}: correct on all")


# (exercise, pitfall name, pitfall id (helpers/pitfalls.py) or None, a piece of the hint
# the learner must see)
EXPECTED = [
    ("embed_tokens", "embeddings not scaled", "T2", "multiply the embeddings by sqrt(d_model)"),
    ("embed_tokens", "positional encoding scaled too", "T2", "scale only the embeddings"),
    ("embed_tokens", "times d_model", None, "the square root of d_model"),
    ("embed_tokens", "divided by sqrt(d_model)", None, "do not divide"),
    ("embed_tokens", "sqrt of the vocabulary size", None, "weight.shape[1]"),
    ("embed_tokens", "pe sliced on the features", "P4", "slice positions, not features"),
    ("residual_sublayer", "layouts swapped", None, "the two layouts are swapped"),
    ("residual_sublayer", "always post-norm", None, "x + sublayer(norm(x))"),
    ("residual_sublayer", "always pre-norm", None, "norm(x + sublayer(x))"),
    ("residual_sublayer", "no residual path", None, "add the input x back"),
    ("residual_sublayer", "residual added after the norm", None, "adds first, then normalises"),
    ("residual_sublayer", "normalised residual path", None, "carries x itself, not norm(x)"),
    ("residual_sublayer", "pre-norm normalises the sum", None, "leaves the sum un-normalised"),
]


def test_every_variant_is_listed():
    registered = {(name, p.name) for name in NAMES for p in EXERCISES[name].pitfalls}
    assert registered == {(name, pitfall) for name, pitfall, _, _ in EXPECTED}


@pytest.mark.parametrize("name, pitfall_name, pid, hint", EXPECTED,
                         ids=[f"{n}-{p}" for n, p, _, _ in EXPECTED])
def test_buggy_variant_fails_with_its_hint(capsys, name, pitfall_name, pid, hint):
    pitfall = next(p for p in EXERCISES[name].pitfalls if p.name == pitfall_name)
    assert pitfall.id == pid
    ok, out = run(capsys, name, pitfall.variant)
    assert ok is False
    assert out.startswith(f"❌ {name}: ")
    assert hint in out
    assert (f"Hint [{pid}]: " if pid else "Hint: ") in out


def _stub_raises(*args):
    raise NotImplementedError("your code here")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("stub", [_stub_raises, lambda *args: None], ids=["raises", "None"])
def test_untouched_stub_is_not_attempted(capsys, name, stub):
    ok, out = run(capsys, name, stub)
    assert ok is False
    assert "not attempted yet" in out


def test_learner_writing_it_differently_passes(capsys):
    """Other correct spellings pass: F.embedding, and an explicit if/else on the layout."""
    def my_embed(tokens, weight, pe):
        e = torch.nn.functional.embedding(tokens, weight)
        return e * weight.shape[-1] ** 0.5 + pe[: tokens.shape[-1]].unsqueeze(0)

    def my_residual(x, sublayer, norm, norm_first):
        if not norm_first:
            return norm(sublayer(x) + x)
        y = norm(x)
        return sublayer(y) + x

    assert run(capsys, "embed_tokens", my_embed)[0] is True
    assert run(capsys, "residual_sublayer", my_residual)[0] is True


def test_embed_tokens_matches_the_model():
    """The reference is what Transformer does before its encoder (dropout 0)."""
    model = Transformer(12, 12, d_model=16, num_heads=4, num_layers=1, d_ff=32, dropout=0.0,
                        max_len=20).eval()
    tokens = torch.randint(0, 12, (2, 7))
    expected = model.positional(model.src_embed(tokens) * math.sqrt(16))
    got = embed_tokens(tokens, model.src_embed.weight, sinusoidal_encoding(20, 16))
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_sublayer_twice_is_an_encoder_layer(norm_first):
    layer = EncoderLayer(16, 4, 32, dropout=0.0, norm_first=norm_first).eval()
    with torch.no_grad():
        layer.norm1.weight.uniform_(0.5, 1.5)
        layer.norm2.bias.uniform_(-0.5, 0.5)
    x = torch.randn(2, 5, 16)
    attention = lambda y: layer.self_attn(y, y, y)  # noqa: E731
    h = residual_sublayer(x, attention, layer.norm1, norm_first)
    y = residual_sublayer(h, layer.feed_forward, layer.norm2, norm_first)
    torch.testing.assert_close(y, layer(x))


def test_reference_accepts_modules_and_a_wrong_answer_fails_cleanly(capsys):
    """The notebook's modules work as sublayer and norm; returning x unchanged is a plain fail."""
    x = torch.randn(1, 2, 6)
    ff, norm = FeedForward(6, 12), LayerNorm(6)
    torch.testing.assert_close(residual_sublayer(x, ff, norm, True), x + ff(norm(x)))
    ok, out = run(capsys, "residual_sublayer", lambda x, sublayer, norm, norm_first: x)
    assert ok is False and out.startswith("❌ residual_sublayer: ")
