"""Notebook 05's exercises: the encoder's input (``embed_tokens``) and ``EncoderLayer.forward``
(``encoder_layer``), into which notebook 04's residual slips are carried."""

import functools
import math

import torch

from ..layers import EncoderLayer, residual_sublayer
from ..positional import sinusoidal_encoding
from .cases import exercise, padded, randn, with_random_norms
from .engine import Case, Exercise, ModuleCase, Pitfall, slip


def embed_tokens(tokens: torch.Tensor, weight: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    """(B, L) token ids -> (B, L, d_model): scaled embeddings plus positions (section 3.4)."""
    d_model = weight.shape[1]  # the width of a row; the first axis is the vocabulary
    L = tokens.shape[1]  # the sentence length
    x = weight[tokens] * math.sqrt(d_model)  # (B, L, d_model): scale the tokens only (section 3.4)
    return x + pe[:L]  # the first L positions (rows), broadcast over the batch


def _embed_tokens_cases(g):
    def case(label, B, L, V, d_model, max_len):
        tokens = torch.randint(0, V, (B, L), generator=g)
        weight = randn(g, V, d_model) * d_model ** -0.5  # helpers/model.py's N(0, 1/d_model)
        return Case(label, (tokens, weight, sinusoidal_encoding(max_len, d_model)))

    return [case("B=2, L=5, V=11, d_model=16, max_len=12", 2, 5, 11, 16, 12),
            case("d_model=4, L = max_len = 3, V=7", 1, 3, 7, 4, 3),
            case("length 1, V=5, d_model=8", 3, 1, 5, 8, 6),
            case("d_model=64, L=7, V=20", 2, 7, 20, 64, 10)]


# notebook 04's residual_sublayer with one slip, as the ``names`` of a layer's slip (also nb07's)
PRE_ALWAYS = {"residual_sublayer": slip(residual_sublayer, ("if norm_first:", "if True:"))}
POST_ALWAYS = {"residual_sublayer": slip(residual_sublayer, ("if norm_first:", "if False:"))}
NORM_OUTPUT_ONLY = {"residual_sublayer": slip(
    residual_sublayer, ("return norm(x + sublayer(x))", "return x + norm(sublayer(x))"))}
NO_SKIP = slip(residual_sublayer, ("return x + sublayer(norm(x))", "return sublayer(norm(x))"),
               ("return norm(x + sublayer(x))", "return norm(sublayer(x))"))


def no_skip(layer, sublayer):
    """``layer``'s forward with no residual path around ``sublayer`` alone."""
    return slip(layer, (f"residual_sublayer(x, {sublayer},", f"no_skip(x, {sublayer},"),
                names={"no_skip": NO_SKIP})


def layer_case(label, layer, args, d_model, heads, norm_first):
    """A case of ``layer`` (d_ff = 2 d_model, no dropout) given weights with random norms."""
    return ModuleCase(label, args, weights_of=with_random_norms(layer),
                      init=dict(d_model=d_model, num_heads=heads, d_ff=2 * d_model,
                                dropout=0.0, norm_first=norm_first))


def _encoder_layer_cases(g):
    def case(label, d_model, heads, length, norm_first, batch=2, mask=False):
        args = (randn(g, batch, length, d_model), padded(batch, length) if mask else None)
        return layer_case(label, EncoderLayer, args, d_model, heads, norm_first)

    return [case("post-norm, d_model=24, 4 heads, no mask", 24, 4, 5, False),
            case("pre-norm, d_model=24, 4 heads, padding mask (B, 1, 1, 5)", 24, 4, 5, True,
                 mask=True),
            case("post-norm, d_model=16, 2 heads, padding mask", 16, 2, 4, False, mask=True),
            case("pre-norm, batch of 1, d_model=8, 2 heads", 8, 2, 3, True, batch=1)]


_ATTEND = "self.self_attn(y, y, y, mask)"
_FIRST, _SECOND = "self_attention, self.norm1", "feed_forward, self.norm2"
_enc = functools.partial(slip, EncoderLayer)
ENCODER_PITFALLS = (
    Pitfall("L1", "always pre-norm", _enc(names=PRE_ALWAYS)),
    Pitfall("L1", "always post-norm", _enc(names=POST_ALWAYS)),
    Pitfall("L2", "no residual around self-attention", no_skip(EncoderLayer, "self_attention")),
    Pitfall("L2", "no residual around the feed-forward", no_skip(EncoderLayer, "feed_forward")),
    Pitfall("L3", "LayerNorm on the sub-layer's output only", _enc(names=NORM_OUTPUT_ONLY)),
    Pitfall("D4", "mask not passed", _enc((_ATTEND, "self.self_attn(y, y, y)")),
            "pass the mask to the attention: self.self_attn(q, k, v, mask); without it the real "
            "tokens attend to the padding."),
    Pitfall("A3", "mask inverted", _enc(("y, mask)", "y, None if mask is None else ~mask)")),
            "in this course True means may attend: pass the mask as it is, no ~mask."),
    Pitfall("L5", "feed-forward first", _enc((_FIRST, "feed_forward, self.norm1"),
                                             (_SECOND, "self_attention, self.norm2"))),
    Pitfall("L6", "LayerNorms swapped", _enc((_FIRST, "self_attention, self.norm2"),
                                             (_SECOND, "feed_forward, self.norm1"))),
    Pitfall(None, "pre-norm normalises only the queries",
            _enc((_ATTEND, "self.self_attn(y, x, x, mask)")), "in pre-norm the whole input of the "
            "sub-layer is normalised: n = self.norm1(x), then self.self_attn(n, n, n, mask)."),
    Pitfall(None, "feed-forward left out",
            _enc(("residual_sublayer(x, feed_forward, self.norm2, self.norm_first)", "x")),
            "an encoder layer has two sub-layers: after self-attention comes self.feed_forward, "
            "with norm2, dropout2 and its own residual path."),
)

_SQRT = "the factor is sqrt(d_model), the width weight.shape[1]"
EXERCISES: dict[str, Exercise] = {
    "embed_tokens": exercise(
        embed_tokens, _embed_tokens_cases, "output",
        ("T2", "embeddings not scaled", (" * math.sqrt(d_model)", ""), None),
        ("T2", "positional encoding scaled too",
         ("x + pe[:L]", "x + pe[:L] * math.sqrt(d_model)"), None),
        (None, "times d_model", ("math.sqrt(d_model)", "d_model"),
         "the factor is the square root of d_model: math.sqrt(d_model), not d_model."),
        (None, "divided by sqrt(d_model)", ("* math", "/ math"),
         "multiply the embeddings by sqrt(d_model), do not divide."),
        (None, "sqrt of the vocabulary size", ("weight.shape[1]", "weight.shape[0]"),
         "d_model is weight.shape[1], the width; weight.shape[0] is the vocabulary size."),
        ("P4", "pe sliced on the features", ("pe[:L]", "pe[:, :L]"), None),
        ("E1", "pe not sliced", ("pe[:L]", "pe"), None),
        ("E1", "pe sliced by the batch size", ("tokens.shape[1]", "tokens.shape[0]"),
         "L is the length, tokens.shape[1]; tokens.shape[0] is the batch size B."),
        ("E1", "one row per sentence", ("pe[:L]", "pe[:tokens.shape[0]][:, None]"),
         "each position gets its own row: pe[:L] (L = tokens.shape[1]), broadcast over the batch."),
        ("E1", "rows 1..L", ("pe[:L]", "pe[1:L + 1]"),
         "positions count from 0: the first token gets row 0, so add pe[:L], not pe[1:L + 1]."),
        ("E2", "positions looked up by token id", ("pe[:L]", "pe[tokens]"), None),
        (None, "sqrt(max_len)", ("math.sqrt(d_model)", "math.sqrt(pe.shape[0])"),
         f"{_SQRT}; pe.shape[0] is max_len."),
        (None, "sqrt(L)", ("math.sqrt(d_model)", "math.sqrt(L)"),
         f"{_SQRT}, not the square root of the sentence length."),
    ),
    "encoder_layer": Exercise(reference=EncoderLayer, make_cases=_encoder_layer_cases,
                              sources=(EncoderLayer.forward,), pitfalls=ENCODER_PITFALLS),
}
