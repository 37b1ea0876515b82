"""Notebook 04's exercises: ``layer_norm`` (bugs N1-N8), ``feed_forward``, ``residual_sublayer``."""

import math
from unittest import mock

import torch
import torch.nn.functional as F

from ..attention import scaled_dot_product_attention
from ..layers import layer_norm, residual_sublayer
from .cases import exercise, randn, slips
from .engine import Case, Exercise, Pitfall


def feed_forward(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
                 b2: torch.Tensor) -> torch.Tensor:
    """Position-wise feed-forward network, equation (2): ``max(0, x W1 + b1) W2 + b2``.

    Shapes: ``x (..., d_model)``, ``w1 (d_model, d_ff)``, ``w2 (d_ff, d_model)``. The module
    ``FeedForward`` in helpers/layers.py does the same with ``nn.Linear``, which stores each
    weight transposed, ``(out, in)``, and computes ``x @ W.T + b``.
    """
    hidden = torch.relu(x @ w1 + b1)  # (..., d_ff): the same two layers act on every position
    return hidden @ w2 + b2  # (..., d_model)


def _refuse(*args, **kwargs):
    raise RuntimeError("this exercise asks you to write LayerNorm yourself: F.layer_norm, "
                       "torch.layer_norm and nn.LayerNorm are switched off during the check")


class OwnCodeCase(Case):
    """A case run with torch's LayerNorm switched off (nn.LayerNorm calls F.layer_norm)."""

    def run(self, fn):
        with (mock.patch.object(F, "layer_norm", _refuse),
              mock.patch.object(torch, "layer_norm", _refuse)):
            return super().run(fn)


def _gain_and_bias(g, d):  # per-feature values, so a scalar gain or bias shows
    return 1 + 0.5 * randn(g, d), 0.5 * randn(g, d)


def _layer_norm_cases(g):
    def case(label, x, **kwargs):  # x drawn first, then its gain and bias
        return OwnCodeCase(label, (x, *_gain_and_bias(g, x.shape[-1])), kwargs)

    return [case("random (2, 3, 6)", 1 + 3 * randn(g, 2, 3, 6)),
            case("eps=0.1, small inputs", 0.3 * randn(g, 2, 4, 5), eps=0.1),
            case("d_model=2", 2 * randn(g, 3, 2)), case("length 1", randn(g, 1, 1, 8)),
            case("constant features (variance 0)", torch.full((1, 2, 4), 3.0))]


_GAIN, _SQRT = "x_hat * weight + bias", "torch.sqrt(var + eps)"
_MEAN, _VAR = "x.mean(dim=-1, keepdim=True)", "(centred ** 2).mean(dim=-1, keepdim=True)"
LAYER_NORM_PITFALLS = slips(layer_norm, [
    ("N1", "unbiased variance",
     [(_VAR, "(centred ** 2).sum(dim=-1, keepdim=True) / (x.shape[-1] - 1)")], None),
    ("N2", "eps outside the square root", (_SQRT, "(torch.sqrt(var) + eps)"), None),
    ("N2", "no epsilon", ("var + eps", "var"),
     "is your epsilon inside the square root? sqrt(var + eps): without it equal values give 0/0."),
    ("N2", "x.std() + eps", (_SQRT, "(x.std(dim=-1, keepdim=True) + eps)"), "is your epsilon "
     "inside the square root? sqrt(var + eps), with the biased variance (x.std() divides by d-1)."),
    ("N3", "scalar gain and bias", (_GAIN, "x_hat * weight.mean() + bias.mean()"), None),
    ("N4", "statistics over the sequence",
     [("x.mean(dim=-1", "x.mean(dim=-2"), ("** 2).mean(dim=-1", "** 2).mean(dim=-2")], None),
    ("N4", "statistics over the batch",
     [("x.mean(dim=-1", "x.mean(dim=0"), ("** 2).mean(dim=-1", "** 2).mean(dim=0")], None),
    ("N4", "statistics over everything", [(_MEAN, "x.mean()"), (_VAR, "(centred ** 2).mean()")],
     None),
    ("N5", "eps subtracted", ("var + eps", "var - eps"), None),
    ("N5", "bias under the root", [("var + eps", "var + bias"), (_GAIN, "x_hat * weight")], None),
    ("N6", "no square root", (_SQRT, "(var + eps)"), None),
    ("N7", "gain and bias swapped", (_GAIN, "x_hat * bias + weight"), None),
    ("N7", "bias before the gain", (_GAIN, "(x_hat + bias) * weight"), None),
    (None, "bias left out", (_GAIN, "x_hat * weight"),
     "end with the learned shift: x_hat * weight + bias."),
    (None, "gain left out", (_GAIN, "x_hat + bias"),
     "multiply by the learned gain before adding the bias: x_hat * weight + bias."),
    ("N8", "mean not subtracted", ("x_hat = centred /", "x_hat = x /"), None),
    ("N8", "variance about zero", (_VAR, "(x ** 2).mean(dim=-1, keepdim=True)"),
     "the variance is the mean square deviation from the mean, ((x - mean) ** 2).mean(-1)."),
    (None, "keepdim forgotten", [(_MEAN, "x.mean(dim=-1)"), (_VAR, "(centred ** 2).mean(dim=-1)")],
     "keep the reduced axis, x.mean(dim=-1, keepdim=True), so that it broadcasts against x."),
    (None, "eps argument ignored", ("var + eps", "var + 1e-5"),
     "use the eps argument, not a fixed 1e-5: one case passes eps=0.1."),
]) + (Pitfall(None, "torch's LayerNorm",
              lambda x, weight, bias, eps=1e-5: F.layer_norm(x, x.shape[-1:], weight, bias, eps),
              "write LayerNorm from its formula: F.layer_norm and nn.LayerNorm are switched off."),)

def _feed_forward_cases(g):
    def weights(d_model, d_ff):
        return (randn(g, d_model, d_ff), randn(g, d_ff), randn(g, d_ff, d_model), randn(g, d_model))

    return [Case("d_model=4, d_ff=8", (randn(g, 2, 3, 4), *weights(4, 8))),
            Case("d_ff = d_model = 5", (randn(g, 2, 2, 5), *weights(5, 5))),
            Case("length 1", (randn(g, 1, 1, 3), *weights(3, 6)))]


def _residual_sublayer_cases(g):
    def norm_fn(d):
        weight, bias = _gain_and_bias(g, d)
        return lambda x: layer_norm(x, weight, bias)

    def ff_fn(d):  # a feed-forward sub-layer, equation (2)
        w1, b1, w2, b2 = randn(g, d, 2 * d), randn(g, 2 * d), randn(g, 2 * d, d), randn(g, d)
        return lambda x: feed_forward(x, w1 / math.sqrt(d), b1, w2 / math.sqrt(2 * d), b2)

    def attention_fn(d):  # a single-head self-attention sub-layer
        wq, wk, wv = (randn(g, d, d) / math.sqrt(d) for _ in range(3))
        return lambda x: scaled_dot_product_attention(x @ wq, x @ wk, x @ wv)[0]

    return [
        Case("post-norm (norm_first=False), feed-forward sub-layer",
             (2 + 3 * randn(g, 2, 4, 6), ff_fn(6), norm_fn(6), False)),
        Case("pre-norm (norm_first=True), feed-forward sub-layer",
             (2 + 3 * randn(g, 2, 4, 6), ff_fn(6), norm_fn(6), True)),
        Case("post-norm, self-attention sub-layer",
             (2 * randn(g, 2, 5, 8), attention_fn(8), norm_fn(8), False)),
        Case("pre-norm, self-attention sub-layer",
             (2 * randn(g, 2, 5, 8), attention_fn(8), norm_fn(8), True)),
        Case("pre-norm, length 1", (1 + randn(g, 1, 1, 4), ff_fn(4), norm_fn(4), True)),
    ]


_RELU = "torch.relu(x @ w1 + b1)"
_PRE, _POST = "return x + sublayer(norm(x))", "return norm(x + sublayer(x))"
_PRE_IS = "pre-norm (norm_first=True) is x + sublayer(norm(x))."
_POST_IS = "post-norm (norm_first=False, the paper) is norm(x + sublayer(x))."
EXERCISES: dict[str, Exercise] = {
    "layer_norm": Exercise(reference=layer_norm, make_cases=_layer_norm_cases,
                           sources=(layer_norm,), pitfalls=LAYER_NORM_PITFALLS),
    "feed_forward": exercise(
        feed_forward, _feed_forward_cases, "output",
        (None, "no ReLU", (_RELU, "(x @ w1 + b1)"),
         "apply ReLU between the two layers: relu(x @ w1 + b1) @ w2 + b2 (equation 2)."),
        (None, "ReLU after the second layer",
         ("return hidden @ w2 + b2", "return torch.relu(hidden @ w2 + b2)"),
         "the second layer is linear, with no ReLU after it: outputs may be negative."),
        (None, "transposed weights", [("x @ w1 +", "x @ w1.T +"), ("hidden @ w2", "hidden @ w2.T")],
         "check the shapes: w1 is (d_model, d_ff), so x @ w1 (nn.Linear stores the transpose)."),
        (None, "no b1", (_RELU, "torch.relu(x @ w1)"),
         "add the first bias inside the ReLU: relu(x @ w1 + b1)."),
        (None, "no b2", ("@ w2 + b2", "@ w2"), "add the second bias at the end: ... @ w2 + b2."),
        (None, "ReLU before b1", (_RELU, "torch.relu(x @ w1) + b1"),
         "add b1 before the ReLU: relu(x @ w1 + b1), not relu(x @ w1) + b1."),
        (None, "w1 and w2 swapped", [("x @ w1 +", "x @ w2 +"), ("hidden @ w2", "hidden @ w1")],
         "w1 (d_model, d_ff) comes first and widens, w2 (d_ff, d_model) second."),
        (None, "GELU", (_RELU, "F.gelu(x @ w1 + b1)"),
         "the paper's activation is ReLU, max(0, .): torch.relu, not GELU."),
        (None, "ReLU on the input", (_RELU, "torch.relu(x) @ w1 + b1"),
         "the ReLU acts on the hidden layer, x @ w1 + b1, not on the input x."),
    ),
    "residual_sublayer": exercise(
        residual_sublayer, _residual_sublayer_cases, "output",
        (None, "layouts swapped", ("if norm_first:", "if not norm_first:"),
         "the two layouts are swapped: norm_first=True is pre-norm, x + sublayer(norm(x)); "
         "norm_first=False is post-norm, norm(x + sublayer(x))."),
        (None, "always post-norm", ("if norm_first:", "if False:"),
         "norm_first is ignored: " + _PRE_IS),
        (None, "always pre-norm", ("if norm_first:", "if True:"),
         "norm_first is ignored: " + _POST_IS),
        (None, "no residual path", [(_PRE, "return sublayer(norm(x))"),
                                    (_POST, "return norm(sublayer(x))")],
         "add the input x back: the sub-layer's output is added to the residual path, x + ...."),
        (None, "residual added after the norm", (_POST, "return norm(sublayer(x)) + x"),
         "the residual is added after the norm: " + _POST_IS),
        (None, "normalised residual path", (_PRE, "return norm(x) + sublayer(norm(x))"),
         "the residual path carries x itself, not norm(x): " + _PRE_IS),
        (None, "pre-norm normalises the sum", (_PRE, "return norm(x + sublayer(norm(x)))"),
         "pre-norm leaves the sum un-normalised (the stack's final norm does that): " + _PRE_IS),
        (None, "post-norm normalises the input", (_POST, "return norm(x) + sublayer(x)"),
         "post-norm normalises the sum, not the input: " + _POST_IS),
        ("L3", "pre-norm normalises the output", (_PRE, "return x + norm(sublayer(x))"),
         "pre-norm normalises the sub-layer's input, not its output: x + sublayer(norm(x))."),
        (None, "sub-layer on the residual path", (_PRE, "return sublayer(x) + sublayer(norm(x))"),
         "the residual path carries x itself, untouched: " + _PRE_IS),
    ),
}
