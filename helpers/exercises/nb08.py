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
# References (shown by solution()). The count is total_parameters here, so that it is not taken
# for helpers.training.count_parameters(model), which counts a built model; solution() shows it
# as count_parameters, the exercise's name, which is exactly as long: its signature stays aligned.
# ----------------------------------------------------------------------------------------------

def total_parameters(d_model: int, num_heads: int, d_ff: int, num_layers: int, src_vocab: int,
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
                linears=2, generator="tgt", shared=False):
    """``total_parameters`` with one mistake: the keyword that differs from its default."""

    def count(d_model, num_heads, d_ff, num_layers, src_vocab, tgt_vocab):
        b = 1 if bias else 0
        attention = 4 * (d_model * d_model + b * d_model) * (num_heads if per_head else 1)
        first, second = d_model * d_ff + b * d_ff, d_ff * d_model + b * d_model
        feed_forward = first + second if linears == 2 else first
        norm = 2 * d_model if norms else 0
        encoder_layer = attention + feed_forward + 2 * norm
        decoder_layer = decoder_attentions * attention + feed_forward + 3 * norm
        vocab = {"tgt": tgt_vocab, "src": src_vocab, None: 0}[generator]
        projection = (0 if shared else d_model * vocab) + b * vocab
        return ((src_vocab + tgt_vocab) * d_model + num_layers * (encoder_layer + decoder_layer)
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

def _decode_with(scale=True, causal=True, memory_mask=True, project=True):
    """``Transformer.decode`` with one mistake: embeddings not scaled (T2), no look-ahead mask
    when none is given (M5), the source padding mask not passed on (D4), no output projection."""

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None):
        x = self.tgt_embed(tgt) * (math.sqrt(self.d_model) if scale else 1.0)
        x = self.positional(x)
        if tgt_mask is None and causal:
            tgt_mask = causal_mask(tgt.shape[1])[None, None]
        x = self.decoder(x, memory, tgt_mask, src_mask if memory_mask else None)
        return self.generator(x) if project else x

    return type("BuggyTransformer", (Transformer,), {"decode": decode})


def _decode_cases(g):
    def case(label, batch=2, t=4, s=6, norm_first=False, given_mask=False):
        tgt = torch.randint(3, 13, (batch, t), generator=g)
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
        case("one sentence, T=5, S=3", batch=1, t=5, s=3),
    ]


EXERCISES: dict[str, Exercise] = {
    "count_parameters": Exercise(
        reference=tensor_reference(total_parameters),
        make_cases=_count_cases,
        sources=(total_parameters,),
        shown_name="count_parameters",  # the exercise's name, as long as the function's
        outputs=("count",),
        atol=0.0,
        rtol=0.0,
        pitfalls=(
            Pitfall(None, "no biases", _count_with(bias=False),
                    "every nn.Linear has a bias besides its weight: 4 d_model per attention block, "
                    "d_ff + d_model per feed-forward network, tgt_vocab for the output "
                    "projection."),
            Pitfall(None, "no LayerNorm", _count_with(norms=False),
                    "each LayerNorm learns a gain and a bias per feature (2 d_model numbers): two "
                    "in an encoder layer, three in a decoder layer."),
            Pitfall(None, "one attention per decoder layer", _count_with(decoder_attentions=1),
                    "a decoder layer has two attention blocks, masked self-attention and "
                    "cross-attention over the memory (section 3.1), each 4 (d_model² + d_model)."),
            Pitfall(None, "positional encoding counted", _count_with(pe_rows=5000),
                    "the sinusoidal positional encoding is a fixed table (a buffer), not learned: "
                    "it adds no parameters."),
            Pitfall(None, "attention counted once per head", _count_with(per_head=True),
                    "the heads share d_model out (d_k = d_model / h each): W_Q, W_K, W_V and W_O "
                    "are d_model x d_model in all, so the count does not depend on num_heads."),
            Pitfall(None, "one linear layer in the feed-forward network", _count_with(linears=1),
                    "the feed-forward network has two linear layers, d_model -> d_ff -> d_model "
                    "(equation 2): 2 d_model d_ff + d_ff + d_model."),
            Pitfall(None, "output projection forgotten", _count_with(generator=None),
                    "the model ends with the output projection, nn.Linear(d_model, tgt_vocab): "
                    "tgt_vocab x d_model weights plus tgt_vocab biases."),
            Pitfall(None, "a vocabulary matrix shared", _count_with(shared=True),
                    "this model keeps three separate matrices (tie_weights=False): the source "
                    "embedding (src_vocab x d_model), the target embedding and the output "
                    "projection (tgt_vocab x d_model each)."),
            Pitfall(None, "output projection over the source vocabulary",
                    _count_with(generator="src"),
                    "the output projection scores target tokens: tgt_vocab x d_model weights plus "
                    "tgt_vocab biases."),
        ),
    ),
    "output_projection": Exercise(
        reference=output_projection,
        make_cases=_projection_cases,
        sources=(output_projection,),
        outputs=("logits",),
        pitfalls=(
            Pitfall(None, "softmax applied", _projection_softmax, _HINT_LOGITS),
            Pitfall(None, "log-softmax applied", _projection_log_softmax, _HINT_LOGITS),
            Pitfall(None, "weight not transposed", _projection_not_transposed,
                    "weight is the (V, d_model) embedding matrix: logits = x @ weight.T + bias, "
                    "one dot product per vocabulary row."),
            Pitfall(None, "scaled by sqrt(d_model)", _projection_scaled,
                    "the sqrt(d_model) factor belongs to the embedding lookup only (section 3.4): "
                    "the output projection uses the shared matrix as it is."),
            Pitfall(None, "divided by sqrt(d_model)", _projection_divided,
                    "no scaling here (1/sqrt(d_k) belongs to attention scores): "
                    "logits = x @ weight.T + bias."),
            Pitfall(None, "bias forgotten", _projection_no_bias,
                    "add the bias: nn.Linear(d_model, V) keeps one bias per vocabulary entry, even "
                    "when its weight is shared with the embedding."),
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
            Pitfall("M5", "no look-ahead mask", _decode_with(causal=False),
                    "the decoder's self-attention needs the look-ahead mask: when tgt_mask is "
                    "None, use causal_mask(T)[None, None]."),
            Pitfall("D4", "source padding mask dropped", _decode_with(memory_mask=False),
                    "pass src_mask on as the decoder's memory_mask: without it the padded source "
                    "tokens are read by the cross-attention."),
            Pitfall(None, "no output projection", _decode_with(project=False),
                    "project the decoder's output to the vocabulary with self.generator: decode "
                    "returns logits (B, T, V), not vectors (B, T, d_model)."),
        ),
    ),
}
