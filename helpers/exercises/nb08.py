"""Notebook 08's exercises: the model's parameter count (``count_parameters``), the
output projection with a shared matrix (``output_projection``), and the learner's
``Transformer.decode`` (``transformer_decode``: T2, M5, D4).
"""

import math

import torch

from ..masks import causal_mask
from ..model import Transformer
from .engine import Case, Exercise, ModuleCase, NumberCase, Pitfall, randn, tensor_reference

# ----------------------------------------------------------------------------------------------
# References (shown by solution() and in notebook 08's reference cells). count_parameters counts
# from the sizes alone; helpers.training.count_parameters(model) counts a built model.
# ----------------------------------------------------------------------------------------------

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


total_parameters = count_parameters  # the name the tests used first


def output_projection(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Logits over the vocabulary from the decoder's output, with the embedding's own matrix.

    Shapes: ``x (..., d_model)``, ``weight (V, d_model)`` (the target embedding matrix, shared as
    in section 3.4 of the paper), ``bias (V,)``; result ``(..., V)``. ``Transformer(...,
    tie_weights=True)`` in helpers/model.py computes the same with ``self.generator``.
    """
    return x @ weight.T + bias  # one dot product per vocabulary row; no sqrt(d_model) here


# ----------------------------------------------------------------------------------------------
# Buggy variants, each with the learner's signature
# ----------------------------------------------------------------------------------------------

def _count_with(bias=True, norms=True, decoder_attentions=2, pe_rows=0, per_head=False,
                linears=2, generator="tgt", shared=False, attention_bias=True, generator_bias=True,
                decoder_norms=3, matrices=4, stacks=2, src_embedding=True, layers=None):
    """``count_parameters`` with one mistake: the keyword that differs from its default."""

    def count(d_model, num_heads, d_ff, num_layers, src_vocab, tgt_vocab):
        b = 1 if bias else 0
        b_attention = b if attention_bias else 0
        attention = (matrices * (d_model * d_model + b_attention * d_model)
                     * (num_heads if per_head else 1))
        first, second = d_model * d_ff + b * d_ff, d_ff * d_model + b * d_model
        feed_forward = first + second if linears == 2 else first
        norm = 2 * d_model if norms else 0
        encoder_layer = attention + feed_forward + 2 * norm
        decoder_layer = decoder_attentions * attention + feed_forward + decoder_norms * norm
        vocab = {"tgt": tgt_vocab, "src": src_vocab, None: 0}[generator]
        projection = (0 if shared else d_model * vocab) + b * vocab * (1 if generator_bias else 0)
        n = num_layers if layers is None else layers
        embeddings = (src_vocab if src_embedding else 0) + tgt_vocab
        return (embeddings * d_model + n * (encoder_layer + decoder_layer * (stacks - 1))
                + projection + pe_rows * d_model)

    return count


def _projection_softmax(x, weight, bias):
    """Probabilities instead of logits."""
    return output_projection(x, weight, bias).softmax(dim=-1)


def _projection_log_softmax(x, weight, bias):
    """Log-probabilities instead of logits."""
    return output_projection(x, weight, bias).log_softmax(dim=-1)


def _projection_not_transposed(x, weight, bias):
    """``x @ weight``: raises unless V == d_model, and is wrong then."""
    return x @ weight + bias


def _projection_scaled(x, weight, bias):
    """The embedding's sqrt(d_model) factor applied to the logits too."""
    return output_projection(x, weight, bias) * math.sqrt(weight.shape[1])


def _projection_divided(x, weight, bias):
    """Divided by sqrt(d_model), as if the logits were attention scores."""
    return output_projection(x, weight, bias) / math.sqrt(weight.shape[1])


def _projection_no_bias(x, weight, bias):
    """The bias forgotten."""
    return x @ weight.T


def _projection_bias_subtracted(x, weight, bias):
    """The bias subtracted."""
    return x @ weight.T - bias


def _projection_last_position(x, weight, bias):
    """Only the last position projected, as for the next token alone."""
    return output_projection(x[..., -1, :], weight, bias)


def _projection_flattened(x, weight, bias):
    """The leading axes flattened and never restored: (N, V)."""
    return output_projection(x.reshape(-1, x.shape[-1]), weight, bias)


def _projection_cosine(x, weight, bias):
    """Cosine similarities: x and the rows of weight normalised first."""
    return output_projection(torch.nn.functional.normalize(x, dim=-1),
                             torch.nn.functional.normalize(weight, dim=-1), bias)


def _projection_argmax(x, weight, bias):
    """The most likely token's id instead of the logits."""
    return output_projection(x, weight, bias).argmax(dim=-1)


# ----------------------------------------------------------------------------------------------
# Test cases
# ----------------------------------------------------------------------------------------------

def _count_cases(g):
    def case(d_model, num_heads, d_ff, num_layers, src_vocab, tgt_vocab, note=""):
        args = (d_model, num_heads, d_ff, num_layers, src_vocab, tgt_vocab)
        label = (f"d_model={d_model}, num_heads={num_heads}, d_ff={d_ff}, num_layers={num_layers}, "
                 f"src_vocab={src_vocab}, tgt_vocab={tgt_vocab}{note}")
        return NumberCase(label, args, dtype=torch.int64)

    return [
        case(8, 2, 16, 1, 10, 12),
        case(16, 4, 64, 2, 20, 20),
        case(12, 3, 24, 3, 7, 30),
        case(6, 1, 6, 1, 5, 5, " (one head)"),
        case(512, 8, 2048, 6, 37000, 37000, " (the paper's base model)"),
    ]


def _projection_cases(g):
    def case(label, x_shape, vocab):
        d_model = x_shape[-1]
        weight = randn(g, vocab, d_model) * d_model ** -0.5  # as helpers/model.py initialises E
        return Case(label, (randn(g, *x_shape), weight, 0.5 * randn(g, vocab)))

    return [
        case("B=2, T=3, d_model=8, V=11", (2, 3, 8), 11),
        case("V = d_model = 6", (1, 4, 6), 6),
        case("length 1, d_model=4, V=9", (1, 1, 4), 9),
        case("2-D input (T, d_model) = (5, 8), V=7", (5, 8), 7),
    ]


_HINT_LOGITS = ("return the logits themselves (any real numbers, one per vocabulary entry): the "
                "loss (notebook 09) and decoding (notebook 10) apply the (log-)softmax.")

# ----------------------------------------------------------------------------------------------
# transformer_decode: the reference's decode with one thing wrong
# ----------------------------------------------------------------------------------------------

def _decode_with(scale=True, causal=True, memory_mask=True, project=True, scale_sum=False,
                 factor=None, mask_axes=4, inverted=False, keep_given=True, normalise=None,
                 embedding="tgt_embed", positions=True, pad_causal=False,
                 swap=None):
    """``Transformer.decode`` with one mistake: embeddings not scaled (T2) or scaled with the
    positions, or by d_model; no look-ahead mask (M5), a 2-D one, an inverted one, one that
    replaces a given ``tgt_mask``, or one with target padding added; the source padding mask not
    passed on (D4); no output projection, or a (log-)softmax after it; the source embedding; no
    positions."""

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None):
        root = math.sqrt(self.d_model) if factor is None else factor(self.d_model)
        if embedding == "src":  # through embed, whose checks name the vocabulary
            x = self.embed(self.src_embed, tgt, "tgt")
        else:
            x = getattr(self, embedding)(tgt)
            x = x * (root if scale and not scale_sum else 1.0)
            x = self.positional(x) if positions else x
        x = x * (root if scale_sum else 1.0)
        if (tgt_mask is None or not keep_given) and causal:
            tgt_mask = causal_mask(tgt.shape[1])
            tgt_mask = ~tgt_mask if inverted else tgt_mask
            tgt_mask = tgt_mask[None, None] if mask_axes == 4 else tgt_mask
            if pad_causal:
                tgt_mask = tgt_mask & (tgt != 0)[:, None, None, :]
        src_mask = src_mask if memory_mask else None
        if swap == "masks":
            x = self.decoder(x, memory, src_mask, tgt_mask)
        elif swap == "inputs":
            x = self.decoder(memory, x, tgt_mask, src_mask)
        else:
            x = self.decoder(x, memory, tgt_mask, src_mask)
        logits = self.generator(x) if project else x
        return getattr(logits, normalise)(dim=-1) if normalise else logits

    return type("BuggyTransformer", (Transformer,), {"decode": decode})


def _decode_cases(g):
    def case(label, batch=2, t=4, s=6, norm_first=False, given_mask=False, pad_target=True):
        tgt = torch.randint(3, 13, (batch, t), generator=g)
        if pad_target:
            tgt[-1, -2:] = 0  # the last target sentence is padded (PAD id 0)
        src_mask = torch.ones(batch, 1, 1, s, dtype=torch.bool)
        src_mask[-1, ..., -2:] = False  # the last source sentence is padded
        tgt_mask = causal_mask(t)[None, None] & (tgt != 0)[:, None, None, :] if given_mask else None
        return ModuleCase(label, (tgt, randn(g, batch, s, 16), src_mask, tgt_mask),
                          weights_of=Transformer, method="decode",
                          init=dict(src_vocab_size=11, tgt_vocab_size=13, d_model=16, num_heads=2,
                                    num_layers=2, d_ff=32, dropout=0.0, norm_first=norm_first))

    return [
        case("post-norm, T=4, S=6, tgt_mask=None (the causal mask alone)"),
        case("pre-norm, a given tgt_mask (causal and padding)", norm_first=True,
             given_mask=True),
        case("one sentence, T=5, S=3", batch=1, t=5, s=3, pad_target=False),
    ]


_HINT_BIAS = ("every nn.Linear has a bias besides its weight: 4 d_model per attention block, "
              "d_ff + d_model per feed-forward network, tgt_vocab for the output projection.")
_HINT_NORMS = ("each LayerNorm learns a gain and a bias per feature (2 d_model numbers): two in an "
               "encoder layer, three in a decoder layer (one after each of its three sub-layers).")
_HINT_MASK = ("when tgt_mask is None, build the look-ahead mask alone with its four axes, "
              "causal_mask(T)[None, None] of shape (1, 1, T, T); a given tgt_mask is used as "
              "it is.")

def _projection_bias_then_scaled(x, weight, bias):
    """The dot products scaled by sqrt(d_model), the bias added after."""
    return x @ weight.T * math.sqrt(weight.shape[1]) + bias


def _projection_bias_then_divided(x, weight, bias):
    """The dot products divided by sqrt(d_model), the bias added after."""
    return x @ weight.T / math.sqrt(weight.shape[1]) + bias


EXERCISES: dict[str, Exercise] = {
    "count_parameters": Exercise(
        reference=tensor_reference(count_parameters),
        make_cases=_count_cases,
        sources=(count_parameters,),
        outputs=("count",),
        atol=0.0,
        rtol=0.0,
        pitfalls=(
            Pitfall("W3", "no biases", _count_with(bias=False), _HINT_BIAS),
            Pitfall("W3", "no attention biases", _count_with(attention_bias=False),
                    "W_Q, W_K, W_V and W_O each have a bias of d_model numbers: an attention "
                    "block holds 4 (d_model² + d_model)."),
            Pitfall("W3", "no output projection bias", _count_with(generator_bias=False),
                    "the output projection nn.Linear(d_model, tgt_vocab) has a bias too: "
                    "tgt_vocab x d_model weights plus tgt_vocab biases."),
            Pitfall("W3", "no LayerNorm", _count_with(norms=False), _HINT_NORMS),
            Pitfall("W3", "two LayerNorms per decoder layer", _count_with(decoder_norms=2),
                    _HINT_NORMS),
            Pitfall("W3", "one attention per decoder layer", _count_with(decoder_attentions=1),
                    "a decoder layer has two attention blocks, masked self-attention and "
                    "cross-attention over the memory (section 3.1), each 4 (d_model² + d_model)."),
            Pitfall("W3", "W_O forgotten", _count_with(matrices=3),
                    "an attention block has four d_model x d_model matrices: W_Q, W_K, W_V and "
                    "the output projection W_O, each with its bias: 4 (d_model² + d_model)."),
            Pitfall("W3", "positional encoding counted", _count_with(pe_rows=5000),
                    "the sinusoidal positional encoding is a fixed table (a buffer), not learned: "
                    "it adds no parameters."),
            Pitfall("W3", "attention counted once per head", _count_with(per_head=True),
                    "the heads share d_model out (d_k = d_model / h each): W_Q, W_K, W_V and W_O "
                    "are d_model x d_model in all, so the count does not depend on num_heads."),
            Pitfall("W3", "one linear layer in the feed-forward network", _count_with(linears=1),
                    "the feed-forward network has two linear layers, d_model -> d_ff -> d_model "
                    "(equation 2): 2 d_model d_ff + d_ff + d_model."),
            Pitfall("W3", "output projection forgotten", _count_with(generator=None),
                    "the model ends with the output projection, nn.Linear(d_model, tgt_vocab): "
                    "tgt_vocab x d_model weights plus tgt_vocab biases."),
            Pitfall("W3", "a vocabulary matrix shared", _count_with(shared=True),
                    "this model keeps three separate matrices (tie_weights=False): the source "
                    "embedding (src_vocab x d_model), the target embedding and the output "
                    "projection (tgt_vocab x d_model each)."),
            Pitfall("W3", "source embedding forgotten", _count_with(src_embedding=False),
                    "count both embeddings: the source one (src_vocab x d_model) and the target "
                    "one (tgt_vocab x d_model)."),
            Pitfall("W3", "output projection over the source vocabulary",
                    _count_with(generator="src"),
                    "the output projection scores target tokens: tgt_vocab x d_model weights plus "
                    "tgt_vocab biases."),
            Pitfall("W3", "the decoder stack forgotten", _count_with(stacks=1),
                    "the model has two stacks of num_layers layers each: the encoder's and the "
                    "decoder's (num_layers is N, the depth of each)."),
            Pitfall("W3", "one layer per stack", _count_with(layers=1),
                    "multiply each layer's count by num_layers: each stack repeats its layer "
                    "num_layers times."),
        ),
    ),
    "output_projection": Exercise(
        reference=output_projection,
        make_cases=_projection_cases,
        sources=(output_projection,),
        outputs=("logits",),
        pitfalls=(
            Pitfall("W1", "softmax applied", _projection_softmax, _HINT_LOGITS),
            Pitfall("W1", "log-softmax applied", _projection_log_softmax, _HINT_LOGITS),
            Pitfall("W1", "argmax taken", _projection_argmax, _HINT_LOGITS),
            Pitfall(None, "weight not transposed", _projection_not_transposed,
                    "weight is the (V, d_model) embedding matrix: logits = x @ weight.T + bias, "
                    "one dot product per vocabulary row."),
            Pitfall(None, "scaled by sqrt(d_model)", _projection_scaled,
                    "the sqrt(d_model) factor belongs to the embedding lookup only (section 3.4): "
                    "the output projection uses the shared matrix as it is."),
            Pitfall(None, "dot products scaled by sqrt(d_model)", _projection_bias_then_scaled,
                    "no sqrt(d_model) here: that factor scales the embeddings on the way in; "
                    "the output projection is x @ weight.T + bias as it is."),
            Pitfall(None, "dot products divided by sqrt(d_model)", _projection_bias_then_divided,
                    "no 1/sqrt(d_model) here: that scaling belongs to attention scores; the "
                    "output projection is x @ weight.T + bias as it is."),
            Pitfall(None, "divided by sqrt(d_model)", _projection_divided,
                    "no scaling here (1/sqrt(d_k) belongs to attention scores): "
                    "logits = x @ weight.T + bias."),
            Pitfall(None, "bias forgotten", _projection_no_bias,
                    "add the bias: nn.Linear(d_model, V) keeps one bias per vocabulary entry, even "
                    "when its weight is shared with the embedding."),
            Pitfall(None, "bias subtracted", _projection_bias_subtracted,
                    "add the bias, do not subtract it: logits = x @ weight.T + bias."),
            Pitfall(None, "last position only", _projection_last_position,
                    "project every position, not only the last: x (..., d_model) gives logits "
                    "(..., V), one row of V scores per position."),
            Pitfall(None, "leading axes flattened", _projection_flattened,
                    "keep the leading axes: x (..., d_model) @ weight.T broadcasts over them, so "
                    "no reshape is needed, and the result is (..., V)."),
            Pitfall(None, "cosine similarity", _projection_cosine,
                    "a logit is the plain dot product of x with a vocabulary row, plus the bias: "
                    "do not normalise x or weight."),
        ),
    ),
    "transformer_decode": Exercise(
        reference=Transformer,
        make_cases=_decode_cases,
        sources=(Transformer.decode,),
        outputs=("logits",),
        pitfalls=(
            Pitfall("T2", "embeddings not scaled", _decode_with(scale=False),
                    "multiply the embeddings by sqrt(d_model) before adding the positions, as "
                    "Transformer.embed does."),
            Pitfall("T2", "positions scaled too", _decode_with(scale_sum=True),
                    "scale the embeddings alone, then add the positions: "
                    "positional(tgt_embed(tgt) * sqrt(d_model)), not positional(...) * "
                    "sqrt(d_model)."),
            Pitfall("T2", "scaled by d_model", _decode_with(factor=float),
                    "the factor is sqrt(d_model), not d_model: math.sqrt(self.d_model)."),
            Pitfall("T2", "scaled by 1/sqrt(d_model)", _decode_with(factor=lambda d: d ** -0.5),
                    "multiply the embeddings by sqrt(d_model), do not divide by it."),
            Pitfall("M5", "no look-ahead mask", _decode_with(causal=False),
                    "the decoder's self-attention needs the look-ahead mask: when tgt_mask is "
                    "None, use causal_mask(T)[None, None] (four axes, (1, 1, T, T))."),
            Pitfall("A3", "look-ahead mask inverted", _decode_with(inverted=True),
                    "in this course True means may attend: causal_mask(T) as it is, without ~ "
                    "(the inverted form is for nn.Transformer*)."),
            Pitfall("W2", "a given tgt_mask replaced", _decode_with(keep_given=False),
                    "use a given tgt_mask as it is (it may hide target padding too); build the "
                    "look-ahead mask only when tgt_mask is None."),
            Pitfall("W2", "target padding added to the look-ahead mask",
                    _decode_with(pad_causal=True),
                    "when tgt_mask is None, the decoder gets the look-ahead mask alone: a caller "
                    "who wants target padding hidden passes a tgt_mask. " + _HINT_MASK),
            Pitfall("W2", "a 2-D look-ahead mask", _decode_with(mask_axes=2),
                    "give the look-ahead mask its four axes, (1, 1, T, T): causal_mask(T)[None, "
                    "None]. The course's attention refuses a 2-D mask, which could pass for a "
                    "(B, T) padding mask."),
            Pitfall("D4", "source padding mask dropped", _decode_with(memory_mask=False),
                    "pass src_mask on as the decoder's memory_mask: without it the padded source "
                    "tokens are read by the cross-attention."),
            Pitfall(None, "the two masks swapped", _decode_with(swap="masks"),
                    "the decoder's arguments are (x, memory, tgt_mask, memory_mask): tgt_mask "
                    "(the look-ahead mask) for its self-attention, src_mask as the memory mask."),
            Pitfall(None, "the target and the memory swapped", _decode_with(swap="inputs"),
                    "call self.decoder(x, memory, tgt_mask, src_mask): the embedded target x "
                    "first, the encoder's memory second."),
            Pitfall("W1", "no output projection", _decode_with(project=False),
                    "project the decoder's output to the vocabulary with self.generator: decode "
                    "returns logits (B, T, V), not vectors (B, T, d_model)."),
            Pitfall("W1", "softmax after the projection", _decode_with(normalise="softmax"),
                    _HINT_LOGITS),
            Pitfall("W1", "log-softmax after the projection",
                    _decode_with(normalise="log_softmax"), _HINT_LOGITS),
            Pitfall(None, "the source embedding", _decode_with(embedding="src"),
                    "the target ids go through self.tgt_embed; self.src_embed is the source "
                    "side's (encode uses it)."),
            Pitfall(None, "the source embedding, called directly",
                    _decode_with(embedding="src_embed"),
                    "the target ids go through self.tgt_embed; self.src_embed is the source "
                    "side's (encode uses it)."),
            Pitfall(None, "no positions", _decode_with(positions=False),
                    "add the positions: self.positional(embeddings * sqrt(d_model)), as "
                    "Transformer.embed does (self.embed(self.tgt_embed, tgt, 'tgt') does both)."),
        ),
    ),
}
