"""Notebook 04's exercises: ``layer_norm`` (with the LayerNorm bugs N1-N8 as buggy
variants), ``feed_forward``, and one sub-layer with its residual path and LayerNorm, post-norm or
pre-norm (``residual_sublayer``).
"""

import contextlib
import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F

from ..attention import scaled_dot_product_attention
from ..layers import layer_norm
from .engine import Case, Exercise, Pitfall, randn

# ----------------------------------------------------------------------------------------------
# References that helpers/ has no function for (shown by solution())
# ----------------------------------------------------------------------------------------------

def feed_forward(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
                 b2: torch.Tensor) -> torch.Tensor:
    """Position-wise feed-forward network, equation (2): ``max(0, x W1 + b1) W2 + b2``.

    Shapes: ``x (..., d_model)``, ``w1 (d_model, d_ff)``, ``w2 (d_ff, d_model)``. The module
    ``FeedForward`` in helpers/layers.py does the same with ``nn.Linear``, which stores each
    weight transposed, ``(out, in)``, and computes ``x @ W.T + b``.
    """
    hidden = torch.relu(x @ w1 + b1)  # (..., d_ff): the same two layers act on every position
    return hidden @ w2 + b2  # (..., d_model)


def residual_sublayer(x: torch.Tensor, sublayer: Callable, norm: Callable,
                      norm_first: bool) -> torch.Tensor:
    """One sub-layer with its residual path and LayerNorm (section 3.1 of the paper).

    Post-norm (the paper, ``norm_first=False``): ``norm(x + sublayer(x))``. Pre-norm:
    ``x + sublayer(norm(x))``. ``EncoderLayer`` in helpers/layers.py (notebook 05) does this
    twice, with self-attention and then the feed-forward network as the sub-layer (dropout
    aside).
    """
    if norm_first:
        return x + sublayer(norm(x))  # the residual path carries x itself, never normalised
    return norm(x + sublayer(x))  # add first, then normalise


# ----------------------------------------------------------------------------------------------
# Buggy variants, each with the learner's signature
# ----------------------------------------------------------------------------------------------

def _ln_unbiased(x, weight, bias, eps=1e-5):
    """N1: unbiased variance (divides by d - 1); nn.LayerNorm divides by d."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def _ln_eps_outside(x, weight, bias, eps=1e-5):
    """N2: ``(x - mean) / (std + eps)``."""
    mean = x.mean(dim=-1, keepdim=True)
    std = x.std(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / (std + eps) * weight + bias


def _ln_no_eps(x, weight, bias, eps=1e-5):
    """N2: no epsilon at all: a constant vector gives 0/0 = NaN."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var) * weight + bias


def _ln_unbiased_std_plus_eps(x, weight, bias, eps=1e-5):
    """N2 (and N1): ``(x - mean) / (x.std() + eps)``, a common tutorial version."""
    mean = x.mean(dim=-1, keepdim=True)
    return (x - mean) / (x.std(dim=-1, keepdim=True) + eps) * weight + bias


def _ln_scalar_gain_bias(x, weight, bias, eps=1e-5):
    """N3: one gain and one bias for all features."""
    return layer_norm(x, weight.mean(), bias.mean(), eps)


def _ln_over(dim):
    """N4: statistics over ``dim`` (None: over every element) instead of the feature axis."""

    def layer_norm_over(x, weight, bias, eps=1e-5):
        if dim is None:
            mean, var = x.mean(), x.var(unbiased=False)
        else:
            mean = x.mean(dim=dim, keepdim=True)
            var = x.var(dim=dim, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + eps) * weight + bias

    return layer_norm_over


def _ln_eps_subtracted(x, weight, bias, eps=1e-5):
    """N5: epsilon subtracted under the root."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var - eps) * weight + bias


def _ln_bias_under_root(x, weight, bias, eps=1e-5):
    """N5: the bias (beta) put under the root in place of epsilon, and not added afterwards."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + bias) * weight


def _ln_no_sqrt(x, weight, bias, eps=1e-5):
    """N6: divided by the variance instead of its square root (the standard deviation)."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / (var + eps) * weight + bias


def _ln_gain_bias_swapped(x, weight, bias, eps=1e-5):
    """N7: the bias used as the gain and the gain as the bias."""
    return layer_norm(x, bias, weight, eps)


def _ln_bias_before_gain(x, weight, bias, eps=1e-5):
    """N7: the bias added before the gain multiplies: (x_hat + bias) * weight."""
    return (layer_norm(x, torch.ones_like(weight), torch.zeros_like(bias), eps) + bias) * weight


def _ln_no_centring(x, weight, bias, eps=1e-5):
    """N8: the mean never subtracted from x: x / sqrt(var + eps)."""
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return x / torch.sqrt(var + eps) * weight + bias


def _ln_variance_about_zero(x, weight, bias, eps=1e-5):
    """N8: the variance taken about 0, mean(x ** 2), instead of about the mean."""
    mean = x.mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight + bias


def _ln_no_keepdim(x, weight, bias, eps=1e-5):
    """keepdim forgotten: (..., L) statistics do not broadcast against (..., L, d)."""
    mean = x.mean(dim=-1)
    var = ((x - mean) ** 2).mean(dim=-1)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def _ln_fixed_eps(x, weight, bias, eps=1e-5):
    """The eps argument ignored: 1e-5 written into the formula."""
    return layer_norm(x, weight, bias, 1e-5)


def _ln_torch_shortcut(x, weight, bias, eps=1e-5):
    """F.layer_norm, which the exercise asks you to write yourself (refused during the check)."""
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


class ShortcutRefused(RuntimeError):
    """Raised when the learner's layer_norm calls torch's own LayerNorm during the check."""


def _refuse(*args, **kwargs):
    raise ShortcutRefused("this exercise asks you to write LayerNorm yourself: F.layer_norm, "
                          "torch.layer_norm and nn.LayerNorm are switched off during the check")


@contextlib.contextmanager
def _without_torch_layer_norm():
    """torch's own LayerNorm (F.layer_norm, which nn.LayerNorm calls, and torch.layer_norm)
    switched off for the duration of one call."""
    saved = F.layer_norm, torch.layer_norm
    F.layer_norm = torch.layer_norm = _refuse
    try:
        yield
    finally:
        F.layer_norm, torch.layer_norm = saved


@dataclass(frozen=True)
class OwnCodeCase(Case):
    """A case run with torch's LayerNorm switched off, so that the answer is the learner's own."""

    def run(self, fn: Callable) -> Any:
        with _without_torch_layer_norm():
            return super().run(fn)


# Feed-forward.

def _ff_no_relu(x, w1, b1, w2, b2):
    """No ReLU: two linear layers collapse into one linear map."""
    return (x @ w1 + b1) @ w2 + b2


def _ff_relu_at_the_end(x, w1, b1, w2, b2):
    """A ReLU after the second layer too: outputs can no longer be negative."""
    return torch.relu(feed_forward(x, w1, b1, w2, b2))


def _ff_transposed_weights(x, w1, b1, w2, b2):
    """Weights used transposed (the nn.Linear habit ``x @ W.T``)."""
    return torch.relu(x @ w1.T + b1) @ w2.T + b2


def _ff_no_b1(x, w1, b1, w2, b2):
    """The first bias b1 left out."""
    return torch.relu(x @ w1) @ w2 + b2


def _ff_no_b2(x, w1, b1, w2, b2):
    """The second bias b2 left out."""
    return torch.relu(x @ w1 + b1) @ w2


def _ff_relu_before_b1(x, w1, b1, w2, b2):
    """ReLU before the bias: relu(x @ w1) + b1."""
    return (torch.relu(x @ w1) + b1) @ w2 + b2


def _ff_weights_swapped(x, w1, b1, w2, b2):
    """w2 used first and w1 second (fits only when d_ff == d_model)."""
    return torch.relu(x @ w2 + b1) @ w1 + b2


def _ff_gelu(x, w1, b1, w2, b2):
    """GELU (BERT, GPT) instead of the paper's ReLU, max(0, .)."""
    return F.gelu(x @ w1 + b1) @ w2 + b2


def _ff_relu_on_input(x, w1, b1, w2, b2):
    """ReLU on the input instead of on the hidden layer."""
    return (torch.relu(x) @ w1 + b1) @ w2 + b2


# Residual sub-layer.

def _residual_layouts_swapped(x, sublayer, norm, norm_first):
    """Post-norm when norm_first is True and pre-norm when it is False."""
    return residual_sublayer(x, sublayer, norm, not norm_first)


def _residual_always_post(x, sublayer, norm, norm_first):
    """norm_first ignored: always the paper's post-norm."""
    return norm(x + sublayer(x))


def _residual_always_pre(x, sublayer, norm, norm_first):
    """norm_first ignored: always pre-norm."""
    return x + sublayer(norm(x))


def _residual_missing(x, sublayer, norm, norm_first):
    """No residual path: the input is not added back."""
    return sublayer(norm(x)) if norm_first else norm(sublayer(x))


def _residual_added_after_norm(x, sublayer, norm, norm_first):
    """Post-norm with the residual added after the norm: ``norm(sublayer(x)) + x``."""
    return x + sublayer(norm(x)) if norm_first else norm(sublayer(x)) + x


def _residual_normalised_path(x, sublayer, norm, norm_first):
    """Pre-norm whose residual path carries norm(x) instead of x."""
    return norm(x) + sublayer(norm(x)) if norm_first else norm(x + sublayer(x))


def _residual_pre_norm_twice(x, sublayer, norm, norm_first):
    """Pre-norm that also normalises the sum: ``norm(x + sublayer(norm(x)))``."""
    return norm(x + sublayer(norm(x))) if norm_first else norm(x + sublayer(x))


def _residual_post_norm_on_input(x, sublayer, norm, norm_first):
    """Post-norm written as norm(x) + sublayer(x): the input normalised, the sum not."""
    return x + sublayer(norm(x)) if norm_first else norm(x) + sublayer(x)


def _residual_pre_norm_on_output(x, sublayer, norm, norm_first):
    """Pre-norm written as x + norm(sublayer(x)): the sub-layer's output normalised (L3)."""
    return x + norm(sublayer(x)) if norm_first else norm(x + sublayer(x))


def _residual_sublayer_twice(x, sublayer, norm, norm_first):
    """Pre-norm whose residual path is the sub-layer's raw output:
    sublayer(x) + sublayer(norm(x))."""
    return sublayer(x) + sublayer(norm(x)) if norm_first else norm(x + sublayer(x))


# ----------------------------------------------------------------------------------------------
# Test cases (seeded; edge cases chosen so that each buggy variant shows)
# ----------------------------------------------------------------------------------------------

def _layer_norm_cases(g):
    def gain_and_bias(d):  # not constant, so a scalar gain or bias shows
        return 1 + 0.5 * randn(g, d), 0.5 * randn(g, d)

    return [
        OwnCodeCase("random (2, 3, 6)", (1 + 3 * randn(g, 2, 3, 6), *gain_and_bias(6))),
        OwnCodeCase("eps=0.1, small inputs", (0.3 * randn(g, 2, 4, 5), *gain_and_bias(5)),
                    {"eps": 0.1}),
        OwnCodeCase("d_model=2", (2 * randn(g, 3, 2), *gain_and_bias(2))),
        OwnCodeCase("length 1", (randn(g, 1, 1, 8), *gain_and_bias(8))),
        OwnCodeCase("constant features (variance 0)",
                    (torch.full((1, 2, 4), 3.0), *gain_and_bias(4))),
    ]


def _feed_forward_cases(g):
    def weights(d_model, d_ff):
        return (randn(g, d_model, d_ff), randn(g, d_ff), randn(g, d_ff, d_model),
                randn(g, d_model))

    return [
        Case("d_model=4, d_ff=8", (randn(g, 2, 3, 4), *weights(4, 8))),
        Case("d_ff = d_model = 5", (randn(g, 2, 2, 5), *weights(5, 5))),
        Case("length 1", (randn(g, 1, 1, 3), *weights(3, 6))),
    ]


def _residual_sublayer_cases(g):
    def norm_fn(d):  # a LayerNorm with a gain and bias that differ per feature
        weight, bias = 1 + 0.5 * randn(g, d), 0.5 * randn(g, d)
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


_HINT_POST = ("post-norm (norm_first=False, the paper) adds first, then normalises: "
              "norm(x + sublayer(x)).")
_HINT_PRE = ("pre-norm (norm_first=True) normalises the sub-layer's input and adds the raw x: "
             "x + sublayer(norm(x)).")


def _ln_no_bias(x, weight, bias, eps=1e-5):
    """The bias left out: x_hat * weight."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / (var + eps).sqrt() * weight


def _ln_no_weight(x, weight, bias, eps=1e-5):
    """The gain left out: x_hat + bias."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / (var + eps).sqrt() + bias


EXERCISES: dict[str, Exercise] = {
    "layer_norm": Exercise(
        reference=layer_norm,
        make_cases=_layer_norm_cases,
        sources=(layer_norm,),
        pitfalls=(
            Pitfall("N1", "unbiased variance", _ln_unbiased,
                    "use the biased variance (divide by d, not d-1), as nn.LayerNorm does: "
                    "x.var(dim=-1, unbiased=False)."),
            Pitfall("N2", "eps outside the square root", _ln_eps_outside,
                    "is your epsilon inside the square root? (x - mean) / sqrt(var + eps)."),
            Pitfall("N2", "no epsilon", _ln_no_eps,
                    "is your epsilon inside the square root? (x - mean) / sqrt(var + eps); "
                    "without it a vector of equal values gives 0/0 = NaN."),
            Pitfall("N2", "x.std() + eps", _ln_unbiased_std_plus_eps,
                    "is your epsilon inside the square root? (x - mean) / sqrt(var + eps), and "
                    "x.std() is unbiased: use the biased variance (divide by d, not d-1)."),
            Pitfall("N3", "scalar gain and bias", _ln_scalar_gain_bias,
                    "gain and bias have one value per feature: multiply by weight and add bias "
                    "elementwise."),
            Pitfall("N4", "statistics over the sequence", _ln_over(-2),
                    "normalise each token's vector over its d_model features (dim=-1)."),
            Pitfall("N4", "statistics over the batch", _ln_over(0),
                    "normalise each token's vector over its d_model features (dim=-1)."),
            Pitfall("N4", "statistics over everything", _ln_over(None),
                    "normalise each token's vector over its d_model features (dim=-1)."),
            Pitfall("N5", "eps subtracted", _ln_eps_subtracted,
                    "only epsilon goes under the root, and it is added: sqrt(var + eps)."),
            Pitfall("N5", "bias under the root", _ln_bias_under_root,
                    "beta is added after normalising; only epsilon goes under the root."),
            Pitfall("N6", "no square root", _ln_no_sqrt,
                    "divide by the standard deviation, the square root of the variance: "
                    "(x - mean) / torch.sqrt(var + eps)."),
            Pitfall("N7", "gain and bias swapped", _ln_gain_bias_swapped,
                    "weight is the gain (it multiplies) and bias the shift (it is added): "
                    "x_hat * weight + bias."),
            Pitfall("N7", "bias before the gain", _ln_bias_before_gain,
                    "multiply by the gain first, then add the bias: x_hat * weight + bias, not "
                    "(x_hat + bias) * weight."),
            Pitfall(None, "bias left out", _ln_no_bias,
                    "end with the learned shift: x_hat * weight + bias."),
            Pitfall(None, "gain left out", _ln_no_weight,
                    "multiply by the learned gain before adding the bias: x_hat * weight + bias."),
            Pitfall("N8", "mean not subtracted", _ln_no_centring,
                    "subtract each token's mean before dividing: (x - mean) / sqrt(var + eps)."),
            Pitfall("N8", "variance about zero", _ln_variance_about_zero,
                    "the variance is the mean square deviation from the mean, ((x - mean) ** 2)"
                    ".mean(-1), not the mean of x ** 2."),
            Pitfall(None, "keepdim forgotten", _ln_no_keepdim,
                    "keep the reduced axis: x.mean(dim=-1, keepdim=True) has shape (..., 1), "
                    "which broadcasts against x (..., d); without keepdim it does not."),
            Pitfall(None, "eps argument ignored", _ln_fixed_eps,
                    "use the eps argument, not a fixed 1e-5: one case passes eps=0.1."),
            Pitfall(None, "torch's LayerNorm", _ln_torch_shortcut,
                    "write LayerNorm from its formula (mean, biased variance, eps inside the "
                    "root, gain, bias): F.layer_norm and nn.LayerNorm are switched off during "
                    "this check."),
        ),
    ),
    "feed_forward": Exercise(
        reference=feed_forward,
        make_cases=_feed_forward_cases,
        sources=(feed_forward,),  # FeedForward, the module, is shown after the reference
        pitfalls=(
            Pitfall(None, "no ReLU", _ff_no_relu,
                    "apply ReLU between the two layers: relu(x @ w1 + b1) @ w2 + b2 "
                    "(equation 2 of the paper)."),
            Pitfall(None, "ReLU after the second layer", _ff_relu_at_the_end,
                    "the second layer is linear, with no ReLU after it: outputs may be negative."),
            Pitfall(None, "transposed weights", _ff_transposed_weights,
                    "check the shapes: w1 is (d_model, d_ff) and w2 is (d_ff, d_model), so use "
                    "x @ w1 (nn.Linear stores the transpose and computes x @ W.T)."),
            Pitfall(None, "no b1", _ff_no_b1,
                    "add the first bias inside the ReLU: relu(x @ w1 + b1)."),
            Pitfall(None, "no b2", _ff_no_b2,
                    "add the second bias at the end: ... @ w2 + b2."),
            Pitfall(None, "ReLU before b1", _ff_relu_before_b1,
                    "add b1 before the ReLU: relu(x @ w1 + b1), not relu(x @ w1) + b1."),
            Pitfall(None, "w1 and w2 swapped", _ff_weights_swapped,
                    "w1 (d_model, d_ff) comes first and widens, w2 (d_ff, d_model) second: "
                    "relu(x @ w1 + b1) @ w2 + b2."),
            Pitfall(None, "GELU", _ff_gelu,
                    "the paper's activation is ReLU, max(0, .): torch.relu, not GELU."),
            Pitfall(None, "ReLU on the input", _ff_relu_on_input,
                    "the ReLU acts on the hidden layer, x @ w1 + b1, not on the input x."),
        ),
    ),
    "residual_sublayer": Exercise(
        reference=residual_sublayer,
        make_cases=_residual_sublayer_cases,
        sources=(residual_sublayer,),
        pitfalls=(
            Pitfall(None, "layouts swapped", _residual_layouts_swapped,
                    "the two layouts are swapped: norm_first=True is pre-norm, x + "
                    "sublayer(norm(x)); norm_first=False is the paper's post-norm, norm(x + "
                    "sublayer(x))."),
            Pitfall(None, "always post-norm", _residual_always_post,
                    "norm_first is ignored: " + _HINT_PRE),
            Pitfall(None, "always pre-norm", _residual_always_pre,
                    "norm_first is ignored: " + _HINT_POST),
            Pitfall(None, "no residual path", _residual_missing,
                    "add the input x back: the residual path is what the sub-layer's output is "
                    "added to (x + ...)."),
            Pitfall(None, "residual added after the norm", _residual_added_after_norm,
                    "the residual is added after the norm: " + _HINT_POST),
            Pitfall(None, "normalised residual path", _residual_normalised_path,
                    "the residual path carries x itself, not norm(x): " + _HINT_PRE),
            Pitfall(None, "pre-norm normalises the sum", _residual_pre_norm_twice,
                    "pre-norm leaves the sum un-normalised (the stack's final LayerNorm does that "
                    "once): " + _HINT_PRE),
            Pitfall(None, "post-norm normalises the input", _residual_post_norm_on_input,
                    "post-norm normalises the sum, not the input: " + _HINT_POST),
            Pitfall("L3", "pre-norm normalises the output", _residual_pre_norm_on_output,
                    "pre-norm normalises the sub-layer's input, not its output: " + _HINT_PRE),
            Pitfall(None, "sub-layer on the residual path", _residual_sublayer_twice,
                    "the residual path carries x itself, untouched: " + _HINT_PRE),
        ),
    ),
}
