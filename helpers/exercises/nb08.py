"""Notebook 08's exercises: ``count_parameters``, ``output_projection`` (with a shared matrix)
and ``Transformer.decode`` (``transformer_decode``, also with slips of ``Transformer.embed``)."""

import math  # noqa: F401 (the slips of output_projection call math.sqrt)

import torch

from ..masks import causal_mask, padding_mask
from ..model import Transformer
from .cases import padded, randn, slips, swaps
from .engine import Case, Exercise, ModuleCase, NumberCase, tensor_reference


def count_parameters(d_model: int, num_heads: int, d_ff: int, num_layers: int, src_vocab: int,
                     tgt_vocab: int) -> int:
    """How many numbers helpers/model.py's ``Transformer(src_vocab, tgt_vocab, d_model,
    num_heads, num_layers, d_ff)`` learns (post-norm; ``tie_weights=False``, so three separate
    vocabulary matrices).

    ``num_heads`` never enters the count: the h heads share d_model out among themselves.
    """
    attention = 4 * (d_model * d_model + d_model)  # W_Q, W_K, W_V, W_O, each with its bias
    feed_forward = (d_model * d_ff + d_ff) + (d_ff * d_model + d_model)  # linear1, linear2
    norm = 2 * d_model  # LayerNorm: a gain and a bias per feature
    encoder_layer = attention + feed_forward + 2 * norm
    decoder_layer = 2 * attention + feed_forward + 3 * norm  # self- and cross-attention
    embeddings = (src_vocab + tgt_vocab) * d_model  # the positional encoding is fixed: 0
    generator = d_model * tgt_vocab + tgt_vocab  # nn.Linear(d_model, tgt_vocab)
    return embeddings + num_layers * (encoder_layer + decoder_layer) + generator


total_parameters = count_parameters  # the name tests/exercises uses


def output_projection(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Logits over the vocabulary from the decoder's output, with the embedding's own matrix.

    Shapes: ``x (..., d_model)``, ``weight (V, d_model)`` (the target embedding matrix, shared as
    in section 3.4 of the paper), ``bias (V,)``; result ``(..., V)``. ``Transformer(...,
    tie_weights=True)`` in helpers/model.py computes the same with ``self.generator``.
    """
    return x @ weight.T + bias  # one dot product per vocabulary row; no sqrt(d_model) here


_GEN = "generator = d_model * tgt_vocab + tgt_vocab"
_ATT = "4 * (d_model * d_model + d_model)"
_FF = "(d_model * d_ff + d_ff) + (d_ff * d_model + d_model)"
_NORMS = ("each LayerNorm learns a gain and a bias per feature (2 d_model numbers): two in an "
          "encoder layer, three in a decoder layer (one after each sub-layer).")
_PROJ = "the output projection nn.Linear(d_model, tgt_vocab): tgt_vocab x d_model weights"
COUNT_PITFALLS = slips(count_parameters, [("W3", *row) for row in (
    ("no biases", [(_ATT, "4 * d_model * d_model"), (_FF, "2 * d_model * d_ff"),
                   (_GEN, "generator = d_model * tgt_vocab")], None),
    ("no attention biases", (_ATT, "4 * d_model * d_model"),
     "W_Q, W_K, W_V and W_O each have a bias of d_model numbers: 4 (d_model² + d_model)."),
    ("no output projection bias", (_GEN, "generator = d_model * tgt_vocab"),
     f"{_PROJ} plus tgt_vocab biases."),
    ("no LayerNorm", ("norm = 2 * d_model", "norm = 0"), _NORMS),
    ("two LayerNorms per decoder layer", ("3 * norm", "2 * norm"), _NORMS),
    ("one attention per decoder layer", ("2 * attention", "attention"),
     "a decoder layer has two attention blocks, masked self-attention and cross-attention, "
     "each 4 (d_model² + d_model)."),
    ("W_O forgotten", ("4 * (", "3 * ("),
     "an attention block has four d_model x d_model matrices, W_Q, W_K, W_V and W_O, each with "
     "its bias."),
    ("positional encoding counted", ("tgt_vocab) * d_model", "tgt_vocab + 5000) * d_model"),
     "the sinusoidal positional encoding is a fixed table (a buffer): it adds no parameters."),
    ("attention counted once per head", (_ATT, _ATT + " * num_heads"),
     "the heads share d_model out (d_k = d_model / h each): the count does not depend on "
     "num_heads."),
    ("one linear layer in the feed-forward network", (" + (d_ff * d_model + d_model)", ""),
     "the feed-forward network has two linear layers, d_model -> d_ff -> d_model (equation 2)."),
    ("output projection forgotten", (_GEN, "generator = 0"),
     f"the model ends with {_PROJ} plus tgt_vocab biases."),
    ("a vocabulary matrix shared", (_GEN, "generator = tgt_vocab"),
     "this model keeps three separate matrices (tie_weights=False): both embeddings and the "
     "output projection."),
    ("source embedding forgotten", ("(src_vocab + tgt_vocab)", "tgt_vocab"),
     "count both embeddings: the source one (src_vocab x d_model) and the target one."),
    ("output projection over the source vocabulary",
     [(_GEN, "generator = d_model * src_vocab + src_vocab")],
     "the output projection scores target tokens: tgt_vocab x d_model weights, tgt_vocab biases."),
    ("the decoder stack forgotten", ("(encoder_layer + decoder_layer)", "encoder_layer"),
     "the model has two stacks of num_layers layers each: the encoder's and the decoder's."),
    ("one layer per stack", ("num_layers * (", "("),
     "multiply each layer's count by num_layers: each stack repeats its layer num_layers times."),
)])


def _count_cases(g):
    def case(*sizes, note=""):  # the arguments of count_parameters, in order
        names = ("d_model", "num_heads", "d_ff", "num_layers", "src_vocab", "tgt_vocab")
        label = ", ".join(f"{name}={size}" for name, size in zip(names, sizes)) + note
        return NumberCase(label, sizes, dtype=torch.int64)

    return [case(8, 2, 16, 1, 10, 12), case(16, 4, 64, 2, 20, 20), case(12, 3, 24, 3, 7, 30),
            case(6, 1, 6, 1, 5, 5, note=" (one head)"),
            case(512, 8, 2048, 6, 37000, 37000, note=" (the paper's base model)")]


_XW, _OUT = "x @ weight.T", "x @ weight.T + bias"
_ROOT = "math.sqrt(weight.shape[1])"
_AS_IT_IS = "the output projection is x @ weight.T + bias as it is."
PROJECTION_PITFALLS = swaps(output_projection, _OUT, [
    ("W1", "softmax applied", f"({_OUT}).softmax(dim=-1)", None),
    ("W1", "log-softmax applied", f"({_OUT}).log_softmax(dim=-1)", None),
    ("W1", "argmax taken", f"({_OUT}).argmax(dim=-1)", None),
    (None, "scaled by sqrt(d_model)", f"({_OUT}) * {_ROOT}",
     "the sqrt(d_model) factor belongs to the embedding lookup only (section 3.4): " + _AS_IT_IS),
    (None, "divided by sqrt(d_model)", f"({_OUT}) / {_ROOT}",
     "no scaling here (1/sqrt(d_k) belongs to attention scores): logits = x @ weight.T + bias."),
]) + swaps(output_projection, _XW, [
    (None, "weight not transposed", "x @ weight",
     "weight is the (V, d_model) embedding matrix: logits = x @ weight.T + bias."),
    (None, "dot products scaled by sqrt(d_model)", f"{_XW} * {_ROOT}",
     "no sqrt(d_model) here: it scales the embeddings on the way in; " + _AS_IT_IS),
    (None, "dot products divided by sqrt(d_model)", f"{_XW} / {_ROOT}",
     "no 1/sqrt(d_model) here: that scaling belongs to attention scores; " + _AS_IT_IS),
    (None, "last position only", "x[..., -1, :] @ weight.T",
     "project every position, not only the last: x (..., d_model) gives logits (..., V)."),
    (None, "leading axes flattened", "x.reshape(-1, x.shape[-1]) @ weight.T",
     "keep the leading axes: x @ weight.T broadcasts over them, and the result is (..., V)."),
    (None, "cosine similarity",
     "torch.nn.functional.normalize(x, dim=-1) @ torch.nn.functional.normalize(weight, dim=-1).T",
     "a logit is the plain dot product of x with a vocabulary row, plus the bias: do not normalise "
     "x or weight."),
]) + swaps(output_projection, " + bias", [
    (None, "bias forgotten", "", "add the bias: nn.Linear(d_model, V) keeps one per vocabulary "
     "entry, even with a shared weight."),
    (None, "bias subtracted", " - bias", "add the bias, do not subtract it: x @ weight.T + bias."),
])


def _projection_cases(g):
    def case(label, x_shape, vocab):
        weight = randn(g, vocab, x_shape[-1]) * x_shape[-1] ** -0.5  # as helpers/model.py's E
        return Case(label, (randn(g, *x_shape), weight, 0.5 * randn(g, vocab)))

    return [case("B=2, T=3, d_model=8, V=11", (2, 3, 8), 11), case("V = d_model = 6", (1, 4, 6), 6),
            case("length 1, d_model=4, V=9", (1, 1, 4), 9),
            case("2-D input (T, d_model) = (5, 8), V=7", (5, 8), 7)]


_SCALED = "self.positional(x * math.sqrt(self.d_model), start)"
_CAUSAL = "tgt_mask = causal_mask(t, device=tgt.device)[None, None, start:]"
_MASKS = "tgt_mask, src_mask, cache)"
_GENERATOR = "self.generator(self.decoder(x, memory, tgt_mask, src_mask, cache))"
_SRC = ("the target ids go through self.tgt_embed; self.src_embed is the source side's (encode "
        "uses it).")
# notebook 05's slips, in Transformer.embed, which decode calls
EMBED_PITFALLS = slips(Transformer, [
    ("T2", "embeddings not scaled", (" * math.sqrt(self.d_model)", ""), None),
    ("T2", "positions scaled too",
     [(_SCALED, "self.positional(x, start) * math.sqrt(self.d_model)")], None),
    ("T2", "scaled by d_model", ("math.sqrt(self.d_model)", "self.d_model"),
     "the factor is sqrt(d_model), not d_model: math.sqrt(self.d_model)."),
    ("T2", "scaled by 1/sqrt(d_model)", ("x * math", "x / math"), None),
    (None, "no positions", (_SCALED, "x * math.sqrt(self.d_model)"),
     "add the positions: self.positional(embeddings * sqrt(d_model)), as Transformer.embed does."),
], method="embed")
DECODE_PITFALLS = EMBED_PITFALLS + slips(Transformer, [
    ("M5", "no look-ahead mask", ("if tgt_mask is None:", "if False:"), None),
    ("A3", "look-ahead mask inverted", ("= causal_mask(", "= ~causal_mask("),
     "in this course True means may attend: causal_mask(T) as it is, without ~ (the inverted "
     "form is for nn.Transformer*)."),
    ("W2", "a given tgt_mask replaced", ("if tgt_mask is None:", "if True:"), None),
    ("W2", "target padding added to the look-ahead mask",
     [(_CAUSAL, _CAUSAL + " & (tgt != 0)[:, None, None, :]")], None),
    ("W2", "a 2-D look-ahead mask", ("[None, None, start:]", "[start:]"), None),
    ("D4", "source padding mask dropped", (_MASKS, "tgt_mask, None, cache)"),
     "pass src_mask on as the decoder's memory_mask: without it the padded source tokens are "
     "read by the cross-attention."),
    (None, "the two masks swapped", (_MASKS, "src_mask, tgt_mask, cache)"),
     "the decoder takes (x, memory, tgt_mask, memory_mask): src_mask is the memory mask."),
    (None, "the target and the memory swapped",
     [("self.decoder(x, memory,", "self.decoder(memory, x,")], "call self.decoder(x, memory, "
     "tgt_mask, src_mask): the embedded target x first, the encoder's memory second."),
    ("W1", "no output projection",
     [(_GENERATOR, "self.decoder(x, memory, tgt_mask, src_mask, cache)")],
     "project the decoder's output to the vocabulary with self.generator: decode returns logits "
     "(B, T, V), not vectors (B, T, d_model)."),
    ("W1", "softmax after the projection", ("return out", "return out.softmax(-1)"), None),
    ("W1", "log-softmax after the projection", ("return out", "return out.log_softmax(-1)"), None),
    (None, "the source embedding", ("self.embed(self.tgt_embed,", "self.embed(self.src_embed,"),
     _SRC),
    (None, "the source embedding, called directly",
     [('self.embed(self.tgt_embed, tgt, "tgt", start)',
       "self.positional(self.src_embed(tgt) * math.sqrt(self.d_model), start)")], _SRC),
], method="decode")


def _decode_cases(g):
    def case(label, batch=2, t=4, s=6, norm_first=False, given_mask=False, pad_target=True):
        tgt = torch.randint(3, 13, (batch, t), generator=g)
        if pad_target:
            tgt[-1, -2:] = 0  # the last target sentence is padded (PAD id 0)
        tgt_mask = causal_mask(t)[None, None] & padding_mask(tgt, 0) if given_mask else None
        return ModuleCase(label, (tgt, randn(g, batch, s, 16), padded(batch, s), tgt_mask),
                          weights_of=Transformer, method="decode",
                          init=dict(src_vocab_size=11, tgt_vocab_size=13, d_model=16, num_heads=2,
                                    num_layers=2, d_ff=32, dropout=0.0, norm_first=norm_first))

    return [case("post-norm, T=4, S=6, tgt_mask=None (the causal mask alone)"),
            case("pre-norm, a given tgt_mask (causal and padding)", norm_first=True,
                 given_mask=True),
            case("one sentence, T=5, S=3", batch=1, t=5, s=3, pad_target=False)]


EXERCISES: dict[str, Exercise] = {
    "count_parameters": Exercise(reference=tensor_reference(count_parameters),
                                 make_cases=_count_cases, sources=(count_parameters,),
                                 outputs=("count",), atol=0.0, rtol=0.0, pitfalls=COUNT_PITFALLS),
    "output_projection": Exercise(reference=output_projection, make_cases=_projection_cases,
                                  sources=(output_projection,), outputs=("logits",),
                                  pitfalls=PROJECTION_PITFALLS),
    "transformer_decode": Exercise(reference=Transformer, make_cases=_decode_cases,
                                   sources=(Transformer.decode,), outputs=("logits",),
                                   pitfalls=DECODE_PITFALLS),
}
