"""Notebook 05's exercises: the encoder's input (``embed_tokens``) and the learner's
``EncoderLayer.forward`` (``encoder_layer``), checked with the reference's weights (L1, L2, L3).
(One sub-layer with its residual path and LayerNorm, ``residual_sublayer``, is notebook 04's.)
"""

import math

import torch

from ..layers import EncoderLayer
from ..positional import sinusoidal_encoding
from .engine import Case, Exercise, ModuleCase, Pitfall, randn

# ----------------------------------------------------------------------------------------------
# The reference (shown by solution())
# ----------------------------------------------------------------------------------------------

def embed_tokens(tokens: torch.Tensor, weight: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    """The encoder's input: embedding rows times sqrt(d_model), plus the positional encoding.

    Shapes: ``tokens (B, L)`` ids, ``weight (V, d_model)``, ``pe (max_len, d_model)`` with
    ``max_len >= L``; result ``(B, L, d_model)``. ``Transformer`` in helpers/model.py does the same
    with ``nn.Embedding`` (notebook 08).
    """
    d_model = weight.shape[1]  # the width of a row; weight.shape[0] is the vocabulary size
    x = weight[tokens] * math.sqrt(d_model)  # (B, L, d_model): scale the tokens only (section 3.4)
    return x + pe[:tokens.shape[1]]  # the first L positions (rows), broadcast over the batch


# ----------------------------------------------------------------------------------------------
# Buggy variants, each with the learner's signature
# ----------------------------------------------------------------------------------------------

def _embed_unscaled(tokens, weight, pe):
    """T2: the embeddings are not multiplied by sqrt(d_model)."""
    return weight[tokens] + pe[:tokens.shape[1]]


def _embed_pe_scaled_too(tokens, weight, pe):
    """T2: the sum is scaled, so the positional encoding grows by sqrt(d_model) as well."""
    return (weight[tokens] + pe[:tokens.shape[1]]) * math.sqrt(weight.shape[1])


def _embed_times_d_model(tokens, weight, pe):
    """Multiplied by d_model instead of its square root."""
    return weight[tokens] * weight.shape[1] + pe[:tokens.shape[1]]


def _embed_divided(tokens, weight, pe):
    """Divided by sqrt(d_model) instead of multiplied."""
    return weight[tokens] / math.sqrt(weight.shape[1]) + pe[:tokens.shape[1]]


def _embed_sqrt_vocab(tokens, weight, pe):
    """d_model read from the wrong axis: sqrt of the vocabulary size."""
    return weight[tokens] * math.sqrt(weight.shape[0]) + pe[:tokens.shape[1]]


def _embed_pe_sliced_on_features(tokens, weight, pe):
    """P4: the table cut along the features instead of the positions."""
    return weight[tokens] * math.sqrt(weight.shape[1]) + pe[:, :tokens.shape[1]]


def _embed_pe_not_sliced(tokens, weight, pe):
    """The whole table added: fits only when L == max_len."""
    return weight[tokens] * math.sqrt(weight.shape[1]) + pe


def _embed_pe_sliced_by_batch(tokens, weight, pe):
    """The table cut to the batch size B (tokens.shape[0]) instead of the length L."""
    return weight[tokens] * math.sqrt(weight.shape[1]) + pe[:tokens.shape[0]]


def _embed_pe_by_token(tokens, weight, pe):
    """E2: the positional table indexed with the token ids instead of the positions."""
    return weight[tokens] * math.sqrt(weight.shape[1]) + pe[tokens]


def _embed_sqrt_max_len(tokens, weight, pe):
    """The factor read from the table's length: sqrt(max_len) instead of sqrt(d_model)."""
    return weight[tokens] * math.sqrt(pe.shape[0]) + pe[:tokens.shape[1]]


def _embed_sqrt_length(tokens, weight, pe):
    """The factor read from the sentence length: sqrt(L) instead of sqrt(d_model)."""
    return weight[tokens] * math.sqrt(tokens.shape[1]) + pe[:tokens.shape[1]]


# ----------------------------------------------------------------------------------------------
# Test cases
# ----------------------------------------------------------------------------------------------

def _embed_tokens_cases(g):
    def case(label, B, L, V, d_model, max_len):
        tokens = torch.randint(0, V, (B, L), generator=g)
        weight = randn(g, V, d_model) * d_model ** -0.5  # helpers/model.py's N(0, 1/d_model)
        return Case(label, (tokens, weight, sinusoidal_encoding(max_len, d_model)))

    return [
        case("B=2, L=5, V=11, d_model=16, max_len=12", 2, 5, 11, 16, 12),
        case("d_model=4, L = max_len = 3, V=7", 1, 3, 7, 4, 3),
        case("length 1, V=5, d_model=8", 3, 1, 5, 8, 6),
        case("d_model=64, L=7, V=20", 2, 7, 20, 64, 10),
    ]


# ----------------------------------------------------------------------------------------------
# encoder_layer: the reference's forward with one thing wrong (also used by nb07)
# ----------------------------------------------------------------------------------------------

def wrapped(x, sublayer, norm, pre: bool, residual: bool = True, norm_output_only: bool = False):
    """One sub-layer with its residual path and LayerNorm, or one of its bugs: no residual (L2),
    ``x + norm(sublayer(x))`` (L3)."""
    if norm_output_only:
        return x + norm(sublayer(x))
    skip = x if residual else 0
    return skip + sublayer(norm(x)) if pre else norm(skip + sublayer(x))


def encoder_variant(layout=None, residual=(True, True), norm_output_only=False, masked=True,
                    order=(0, 1), norms=(1, 2), inverted=False, query_only=False,
                    feed_forward=True):
    """An EncoderLayer whose forward has one bug; ``layout``: "pre" or "post" whatever
    ``norm_first`` says (L1); ``masked`` False: the mask never reaches the attention (D4);
    ``order`` (1, 0): the feed-forward first (L5); ``norms`` (2, 1): the LayerNorms swapped
    (L6); ``inverted``: the mask inverted (A3); ``query_only``: pre-norm normalising only the
    queries; ``feed_forward`` False: the second sub-layer left out."""
    def forward(self, x, mask=None):
        pre = self.norm_first if layout is None else layout == "pre"
        m = (None if mask is None else ~mask) if inverted else mask

        def attend(y):
            if query_only and pre:  # y is norm1(x); keys and values should be too
                return self.dropout1(self.self_attn(y, raw, raw, m if masked else None))
            return self.dropout1(self.self_attn(y, y, y, m if masked else None))

        steps = [attend, lambda y: self.dropout2(self.feed_forward(y))]
        for place, i in enumerate(order[:2 if feed_forward else 1]):  # norms by place, not step
            raw = x
            x = wrapped(x, steps[i], getattr(self, f"norm{norms[place]}"), pre, residual[place],
                        norm_output_only)
        return x
    return type("BuggyEncoderLayer", (EncoderLayer,), {"forward": forward})


class RandomNormsEncoderLayer(EncoderLayer):
    """The reference with LayerNorms whose gain and bias differ per feature and per LayerNorm
    (the weights check loads into the learner's layer), so that swapped LayerNorms show."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        randomise_norms(self)


def randomise_norms(module):
    """Give every LayerNorm of ``module`` a gain near 1 and a bias near 0 that differ per feature
    (from the global generator, which ModuleCase has seeded)."""
    with torch.no_grad():
        for name, child in module.named_children():
            if name.startswith("norm"):
                child.weight.copy_(1 + 0.3 * torch.randn_like(child.weight))
                child.bias.copy_(0.3 * torch.randn_like(child.bias))


def _encoder_layer_cases(g):
    def case(label, d_model, heads, length, norm_first, batch=2, padded=False):
        mask = None
        if padded:  # the last sentence ends two tokens early: (B, 1, 1, L)
            mask = torch.ones(batch, 1, 1, length, dtype=torch.bool)
            mask[-1, ..., -2:] = False
        return ModuleCase(label, (randn(g, batch, length, d_model), mask),
                          weights_of=RandomNormsEncoderLayer,
                          init=dict(d_model=d_model, num_heads=heads, d_ff=2 * d_model,
                                    dropout=0.0, norm_first=norm_first))

    return [
        case("post-norm, d_model=24, 4 heads, no mask", 24, 4, 5, False),
        case("pre-norm, d_model=24, 4 heads, padding mask (B, 1, 1, 5)", 24, 4, 5, True,
             padded=True),
        case("post-norm, d_model=16, 2 heads, padding mask", 16, 2, 4, False, padded=True),
        case("pre-norm, batch of 1, d_model=8, 2 heads", 8, 2, 3, True, batch=1),
    ]


HINT_L1 = ("follow self.norm_first: post-norm is LayerNorm(x + sublayer(x)), pre-norm is "
           "x + sublayer(LayerNorm(x)).")
HINT_L2 = "add the sublayer's input back: each sub-layer sits on a residual path, x + ..."
HINT_L3 = ("normalise the sum, LayerNorm(x + sublayer(x)), not only the sub-layer's output: "
           "x + LayerNorm(sublayer(x)) lets the residual stream grow unnormalised.")

HINT_D4 = ("pass the mask to the attention: self.self_attn(q, k, v, mask); without it the real "
           "tokens attend to the padding.")
HINT_L6 = ("each sub-layer has its own LayerNorm: norm1 with the first sub-layer, norm2 with the "
           "second (and norm3 with the third), in the order of the __init__.")


def _embed_pe_row_per_sentence(tokens, weight, pe):
    """Row b of the table for every position of sentence b: ``pe[:B][:, None]``."""
    return weight[tokens] * math.sqrt(weight.shape[1]) + pe[:tokens.shape[0]][:, None]


def _embed_pe_from_1(tokens, weight, pe):
    """Rows 1..L of the table: the first position gets the encoding of position 1."""
    L = tokens.shape[1]
    return weight[tokens] * math.sqrt(weight.shape[1]) + pe[1:L + 1]


EXERCISES: dict[str, Exercise] = {
    "embed_tokens": Exercise(
        reference=embed_tokens,
        make_cases=_embed_tokens_cases,
        sources=(embed_tokens,),
        pitfalls=(
            Pitfall("T2", "embeddings not scaled", _embed_unscaled,
                    "multiply the embeddings by sqrt(d_model) (section 3.4): weight[tokens] * "
                    "math.sqrt(d_model) + pe[:L]. Without the factor the tokens are sqrt(d_model) "
                    "times quieter than the positions."),
            Pitfall("T2", "positional encoding scaled too", _embed_pe_scaled_too,
                    "scale only the embeddings, then add the positional encoding as it is: "
                    "weight[tokens] * math.sqrt(d_model) + pe[:L]."),
            Pitfall(None, "times d_model", _embed_times_d_model,
                    "the factor is the square root of d_model: math.sqrt(d_model), not d_model."),
            Pitfall(None, "divided by sqrt(d_model)", _embed_divided,
                    "multiply the embeddings by sqrt(d_model), do not divide."),
            Pitfall(None, "sqrt of the vocabulary size", _embed_sqrt_vocab,
                    "d_model is the width of the embedding matrix, weight.shape[1] "
                    "(weight.shape[0] is the vocabulary size)."),
            Pitfall("P4", "pe sliced on the features", _embed_pe_sliced_on_features,
                    "slice positions, not features: pe[:L] takes the first L rows."),
            Pitfall("E1", "pe not sliced", _embed_pe_not_sliced,
                    "add only the first L rows of the table, pe[:L] with L = tokens.shape[1]: "
                    "pe has max_len rows."),
            Pitfall("E1", "pe sliced by the batch size", _embed_pe_sliced_by_batch,
                    "L is the length, tokens.shape[1]; tokens.shape[0] is the batch size B."),
            Pitfall("E1", "one row per sentence", _embed_pe_row_per_sentence,
                    "each position gets its own row: pe[:L] (L = tokens.shape[1]) broadcasts "
                    "over the batch; pe[:B][:, None] gives every position of sentence b row b."),
            Pitfall("E1", "rows 1..L", _embed_pe_from_1,
                    "positions count from 0: the first token gets row 0, so add pe[:L], not "
                    "pe[1:L + 1]."),
            Pitfall("E2", "positions looked up by token id", _embed_pe_by_token,
                    "position p gets row p of pe: add pe[:L] (the positions 0..L-1), not "
                    "pe[tokens] (rows picked by the token ids)."),
            Pitfall(None, "sqrt(max_len)", _embed_sqrt_max_len,
                    "the factor is sqrt(d_model), the width weight.shape[1]; pe.shape[0] is "
                    "max_len."),
            Pitfall(None, "sqrt(L)", _embed_sqrt_length,
                    "the factor is sqrt(d_model), the width weight.shape[1], not the square "
                    "root of the sentence length."),
        ),
    ),
    "encoder_layer": Exercise(
        reference=EncoderLayer,
        make_cases=_encoder_layer_cases,
        sources=(EncoderLayer.forward,),
        pitfalls=(
            Pitfall("L1", "always pre-norm", encoder_variant(layout="pre"), HINT_L1),
            Pitfall("L1", "always post-norm", encoder_variant(layout="post"), HINT_L1),
            Pitfall("L2", "no residual around self-attention",
                    encoder_variant(residual=(False, True)), HINT_L2),
            Pitfall("L2", "no residual around the feed-forward",
                    encoder_variant(residual=(True, False)), HINT_L2),
            Pitfall("L3", "LayerNorm on the sub-layer's output only",
                    encoder_variant(norm_output_only=True), HINT_L3),
            Pitfall("D4", "mask not passed", encoder_variant(masked=False), HINT_D4),
            Pitfall("A3", "mask inverted", encoder_variant(inverted=True),
                    "in this course True means may attend: pass the mask as it is, no ~mask."),
            Pitfall("L5", "feed-forward first", encoder_variant(order=(1, 0)),
                    "self-attention comes first, then the feed-forward network."),
            Pitfall("L6", "LayerNorms swapped", encoder_variant(norms=(2, 1)), HINT_L6),
            Pitfall(None, "pre-norm normalises only the queries",
                    encoder_variant(query_only=True),
                    "in pre-norm the whole input of the sub-layer is normalised: n = "
                    "self.norm1(x), then self.self_attn(n, n, n, mask)."),
            Pitfall(None, "feed-forward left out", encoder_variant(feed_forward=False),
                    "an encoder layer has two sub-layers: after self-attention comes "
                    "self.feed_forward, with norm2, dropout2 and its own residual path."),
        ),
    ),
}
