"""Exercise checkers for the notebooks: ``check(name, fn)`` and ``solution(name)``.

In a notebook::

    from helpers.exercises import check, solution

    def my_causal_mask(size):
        raise NotImplementedError  # your code here

    check("causal_mask", my_causal_mask)   # prints one message, returns True or False
    solution("causal_mask")                # prints the reference code

How ``check`` works:

1. Your function runs on a few seeded cases (random inputs of several shapes, plus edge cases such
   as a fully masked row, length 1 or ``d_model = 2``) and is compared with the reference.
2. If it differs, every known buggy variant of that exercise runs on the same cases: the classic
   Transformer bugs of the course's pitfall list (ids A1-A5 attention, P1-P5 positional encoding,
   N1-N5 LayerNorm, H1-H2 heads, M1-M4 masks, as in the notebooks' "Common pitfalls" sections),
   plus a few others. When your output matches one, ``check`` prints its hint, e.g. ``[N2]``.
3. Otherwise it tells you the first thing that differs (type, shape, dtype, NaN, or the first wrong
   value and the largest difference).

``check`` never raises for a wrong answer: an exception inside your function (``SystemExit``
included), a wrong type, shape or dtype, or NaN are all reported as a failure. An untouched stub
(its body is only ``return None``, ``pass`` or ``raise NotImplementedError``, or it raises
``NotImplementedError`` on every case) reports "not attempted yet", so a notebook still runs top
to bottom. A function with code that returns ``None`` is asked "did you forget `return`?".
``print`` calls inside your function are silenced during the check; call it directly to debug.

Each call of your function has a time limit (``TIME_LIMIT`` = 10 s; ``check(name, fn,
time_limit=60)`` for another, ``math.inf`` for none): a function that never returns is reported
instead of freezing the notebook. It runs in a background thread (that works in every kernel, on
Linux, macOS, Windows and Colab alike), which Python cannot stop from outside: after such a report
the call goes on in the background, so restart the kernel if it stays busy.

An unknown exercise name is a typo in the notebook, not a wrong answer: ``check`` and ``solution``
both raise ``ValueError`` listing the known names.

Everything printed is deterministic (seeded inputs, no addresses, no timings), so notebooks that
call ``check`` can be compared by nbval. The global random state is left untouched.

To add an exercise: write its reference (or import it from ``helpers``), its buggy variants and a
case builder, then add an :class:`Exercise` to ``EXERCISES``. ``tests/test_exercises.py`` picks it
up automatically.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import math
import re
import textwrap
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .attention import merge_heads, scaled_dot_product_attention, split_heads
from .checks import check_scores_mask
from .layers import FeedForward, layer_norm
from .masks import causal_mask, padding_mask
from .positional import PositionalEncoding, sinusoidal_encoding

__all__ = ["check", "solution", "EXERCISES", "Exercise", "Pitfall", "Case", "TIME_LIMIT"]

PASS, FAIL, TODO, HINT = "✅", "❌", "⏳", "💡"
# Seconds each call of the learner's function may take (math.inf: no limit). Measured on a
# loaded 2-core machine: the slowest reference case takes under 2 ms in a fresh process, the
# whole check of a reference answer under 15 ms. 10 s leaves room for a correct answer written
# with Python loops, and for the first call of a lazily loaded part of torch (about 1 s for
# torch.broadcast_shapes); an endless loop is still reported before a learner gives up waiting.
TIME_LIMIT = 10.0


# ----------------------------------------------------------------------------------------------
# The registry's building blocks
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One call of the learner's function: a short label and the arguments."""

    label: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def run(self, fn: Callable) -> Any:
        """Call ``fn`` on fresh copies of the inputs, so in-place edits cannot leak out."""
        return fn(*_clone(self.args), **_clone(self.kwargs))

    def describe(self) -> str:
        """The label, plus the shapes of the tensor inputs (other inputs are in the label)."""
        shapes = [str(tuple(a.shape)) for a in self.args if torch.is_tensor(a)]
        return f"{self.label}; input shapes {', '.join(shapes)}" if shapes else self.label


@dataclass(frozen=True)
class Pitfall:
    """A known mistake: its pitfall id such as "N2" (None for a bug outside the course's list),
    the buggy code with the learner's signature, and the hint ``check`` prints on a match."""

    id: str | None
    name: str
    variant: Callable
    hint: str


@dataclass(frozen=True)
class Exercise:
    """Everything ``check`` and ``solution`` need for one exercise."""

    reference: Callable  # the right answer, with the learner's signature
    make_cases: Callable[[torch.Generator], list]  # seeded generator -> list of Case
    pitfalls: tuple  # Pitfall, ..., tried in order: the first one that matches gives the hint
    sources: tuple  # functions whose source solution() prints
    outputs: tuple = ("output",)  # names of the returned tensors; more than one means a tuple
    atol: float = 1e-5
    rtol: float = 1e-4

    def cases(self) -> list:
        """The test cases, the same on every call (a private generator, seed 0)."""
        return self.make_cases(torch.Generator().manual_seed(0))


# ----------------------------------------------------------------------------------------------
# References that helpers/ has no function for (shown by solution())
# ----------------------------------------------------------------------------------------------

def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the keys (last axis) where ``mask`` is True; a row with no allowed key -> 0.

    The same steps as inside ``scaled_dot_product_attention`` in helpers/attention.py.
    """
    check_scores_mask(mask, scores.shape, "masked_softmax")  # a clear error for a wrong mask
    # The most negative finite number, not -inf: a fully masked row then gives a finite
    # (uniform) softmax instead of 0/0 = NaN, and the last line turns it into zeros.
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # (..., Lq, Lk)
    weights = scores.softmax(dim=-1)  # each query's weights over the keys sum to 1
    return weights.masked_fill(~mask, 0.0)  # rows with no allowed key become all 0


def add_positional_encoding(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    """``x (B, L, d_model)`` plus the first L rows of the ``(max_len, d_model)`` table ``pe``."""
    L = x.shape[1]
    return x + pe[:L]  # slice positions (rows), not features; (L, d_model) broadcasts over B


def pe_rotation(k: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The ``(d_model, d_model)`` matrix M with ``PE[p + k] == M @ PE[p]`` for every position p.

    Columns ``(2i, 2i+1)`` of PE hold ``(sin(p w_i), cos(p w_i))``, ``w_i = base**(-2i/d_model)``.
    The angle-addition formulas give, for each pair, a 2x2 rotation that does not depend on p:
    ``sin(a + b) = sin a cos b + cos a sin b`` and ``cos(a + b) = cos a cos b - sin a sin b``.
    """
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        angle = k / base ** (2 * i / d_model)  # k * w_i
        c, s = math.cos(angle), math.sin(angle)
        M[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.tensor([[c, s],  # new sin
                                                              [-s, c]])  # new cos
    return M.float()


def feed_forward(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
                 b2: torch.Tensor) -> torch.Tensor:
    """Position-wise feed-forward network, equation (2): ``max(0, x W1 + b1) W2 + b2``.

    Shapes: ``x (..., d_model)``, ``w1 (d_model, d_ff)``, ``w2 (d_ff, d_model)``. The module
    ``FeedForward`` in helpers/layers.py does the same with ``nn.Linear``, which stores each
    weight transposed, ``(out, in)``, and computes ``x @ W.T + b``.
    """
    hidden = torch.relu(x @ w1 + b1)  # (..., d_ff): the same two layers act on every position
    return hidden @ w2 + b2  # (..., d_model)


# ----------------------------------------------------------------------------------------------
# Buggy variants (the course's pitfall list), each with the learner's signature
# ----------------------------------------------------------------------------------------------

# Masked softmax: scores (..., Lq, Lk), bool mask broadcastable to it, True = may attend.

def _softmax_then_zero(scores, mask):
    """A2: softmax first, masked weights set to 0 afterwards: rows no longer sum to 1."""
    return scores.softmax(dim=-1).masked_fill(~mask, 0.0)


def _softmax_then_minus_inf(scores, mask):
    """A2: softmax first, masked weights set to -inf afterwards."""
    return scores.softmax(dim=-1).masked_fill(~mask, float("-inf"))


def _softmax_inverted_mask(scores, mask):
    """A3: True treated as "blocked"."""
    return masked_softmax(scores, ~mask)


def _softmax_over_queries(scores, mask):
    """A4: ``softmax(dim=-2)`` normalises each key's column over the queries."""
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return scores.softmax(dim=-2).masked_fill(~mask, 0.0)


def _softmax_nan_rows(scores, mask):
    """A5: fill with -inf: a fully masked row is softmax(-inf, ..., -inf) = 0/0 = NaN."""
    return scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)


def _softmax_uniform_rows(scores, mask):
    """A5: a large negative fill but no zeroing: a fully masked row gets weights 1/Lk."""
    return scores.masked_fill(~mask, -1e9).softmax(dim=-1)


def _attention_with(softmax_fn, scale=math.sqrt):
    """Build attention from a (maybe buggy) masked softmax and a (maybe buggy) scale of d_k."""

    def attention(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / scale(q.shape[-1])  # (..., Lq, Lk)
        if mask is None:
            mask = torch.ones((), dtype=torch.bool)  # a scalar True: nothing is masked
        weights = softmax_fn(scores, mask)
        return weights @ v, weights

    return attention


def _attention_inverted_mask(q, k, v, mask=None):
    """A3: the mask used with True = blocked."""
    return scaled_dot_product_attention(q, k, v, None if mask is None else ~mask)


# Sinusoidal positional encoding.

def _two_i(d_model):
    return torch.arange(0, d_model, 2, dtype=torch.float64)  # 0, 2, 4, ...: even column indices


def _angles(max_len, d_model, base, two_i):
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    return position / base ** (two_i / d_model)  # (max_len, d_model / 2)


def _interleave(even, odd):
    pe = torch.zeros(even.shape[0], 2 * even.shape[1], dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = even, odd
    return pe.float()


def _pe_doubled_exponent(max_len, d_model, base=10000.0):
    """P1: the loop index already steps 0, 2, 4, ... and is doubled again in the exponent."""
    angle = _angles(max_len, d_model, base, 2 * _two_i(d_model))
    return _interleave(torch.sin(angle), torch.cos(angle))


def _pe_halves(max_len, d_model, base=10000.0):
    """P2: sines in the first half of the columns, cosines in the second half."""
    angle = _angles(max_len, d_model, base, _two_i(d_model))
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1).float()


def _pe_frequency_off_by_one(max_len, d_model, base=10000.0):
    """P3: ``k = dimension // 2 + 1``: every frequency shifted by one pair, column 0 != sin(p)."""
    angle = _angles(max_len, d_model, base, _two_i(d_model) + 2)
    return _interleave(torch.sin(angle), torch.cos(angle))


def _pe_sin_cos_swapped(max_len, d_model, base=10000.0):
    """P5: cosines on the even columns, sines on the odd ones."""
    angle = _angles(max_len, d_model, base, _two_i(d_model))
    return _interleave(torch.cos(angle), torch.sin(angle))


def _add_pe_slicing_features(x, pe):
    """P4: the table is cut along the features instead of the positions."""
    return x + pe[:, :x.shape[1]]


def _add_pe_without_slicing(x, pe):
    """The whole (max_len, d_model) table added to a shorter sequence."""
    return x + pe


def _rotation_by_minus_k(k, d_model, base=10000.0):
    """Each 2x2 block transposed, ``[[cos, -sin], [sin, cos]]``: a rotation by -k."""
    return pe_rotation(k, d_model, base).T


def _rotation_on_halves(k, d_model, base=10000.0):
    """P2: column i paired with column i + d_model/2, as if sines filled the first half."""
    half = d_model // 2
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(half):
        angle = k / base ** (2 * i / d_model)
        c, s = math.cos(angle), math.sin(angle)
        M[i, i], M[i, i + half] = c, s
        M[i + half, i], M[i + half, i + half] = -s, c
    return M.float()


# Heads.

def _split_view_d_k_h(x, num_heads):
    """H1: ``view(B, L, d_k, h)``: the right shape only when d_k == h, and then the same values."""
    B, L, d_model = x.shape
    return x.view(B, L, d_model // num_heads, num_heads).transpose(1, 2)  # (B, d_k, L, h)


def _split_strided(x, num_heads):
    """H1: ``view(B, L, d_k, h)`` with heads moved forward: head i gets features i, i+h, ..."""
    B, L, d_model = x.shape
    return x.view(B, L, d_model // num_heads, num_heads).permute(0, 3, 1, 2)  # (B, h, L, d_k)


def _split_view_straight(x, num_heads):
    """H1: ``view(B, h, L, d_k)`` with no transpose: the right shape, tokens and heads mixed."""
    B, L, d_model = x.shape
    return x.view(B, num_heads, L, d_model // num_heads)


def _split_missing_transpose(x, num_heads):
    """``view(B, L, h, d_k)`` and no transpose: returns (B, L, h, d_k)."""
    B, L, d_model = x.shape
    return x.view(B, L, num_heads, d_model // num_heads)


def _merge_without_transpose(x):
    """H2: (B, h, L, d_k) reshaped straight to (B, L, h * d_k), scrambling tokens and heads."""
    B, h, L, d_k = x.shape
    return x.reshape(B, L, h * d_k)


def _merge_view_after_transpose(x):
    """``transpose`` then ``view``: view needs contiguous memory, so this raises."""
    B, h, L, d_k = x.shape
    return x.transpose(1, 2).view(B, L, h * d_k)


# LayerNorm.

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


# Masks.

def _causal_triu(size):
    """M1: ``triu``: the future allowed, the past blocked."""
    return torch.ones(size, size, dtype=torch.bool).triu()


def _causal_blocked_convention(size):
    """M1: ``triu(diagonal=1)``, the True = blocked mask of nn.Transformer."""
    return torch.ones(size, size, dtype=torch.bool).triu(diagonal=1)


def _causal_without_diagonal(size):
    """M2: ``tril(diagonal=-1)``: a token may not attend to itself."""
    return torch.ones(size, size, dtype=torch.bool).tril(diagonal=-1)


def _causal_float(size):
    """The right pattern as a float tensor of 1s and 0s."""
    return torch.ones(size, size).tril()


def _padding_on_queries(tokens, pad_id):
    """M3: (B, 1, L, 1): hides padded queries (rows) but not padded keys (columns)."""
    return (tokens != pad_id)[:, None, :, None]


def _padding_without_axes(tokens, pad_id):
    """M3: (B, L) without the singleton axes: does not broadcast to (B, h, Lq, Lk) correctly."""
    return tokens != pad_id


def _padding_inverted(tokens, pad_id):
    """M4: ``tokens == pad_id`` marks the padding as True."""
    return (tokens == pad_id)[:, None, None, :]


# ----------------------------------------------------------------------------------------------
# Test cases (seeded; edge cases chosen so that each buggy variant shows)
# ----------------------------------------------------------------------------------------------

def _randn(g, *shape):
    return torch.randn(*shape, generator=g)


def _random_mask(g, *shape):
    """Random bool mask, True = may attend, with at least one allowed key in every row."""
    mask = torch.rand(*shape, generator=g) < 0.6
    mask[..., -1] = False  # something is masked in every row, so masking bugs show
    mask[..., 0] |= ~mask.any(dim=-1)
    return mask


def _mask_with_blocked_row(g, B, Lq, Lk, row):
    """A random mask where query ``row`` of the first batch may attend to no key at all."""
    mask = _random_mask(g, B, Lq, Lk)
    mask[0, row] = False
    return mask


def _attention_cases(g):
    return [
        Case("no mask", (_randn(g, 2, 3, 8), _randn(g, 2, 4, 8), _randn(g, 2, 4, 5))),
        Case("a random mask", (_randn(g, 2, 4, 6), _randn(g, 2, 5, 6), _randn(g, 2, 5, 6),
                               _random_mask(g, 2, 4, 5))),
        Case("4-D (B, h, L, d_k) inputs with a causal mask",
             (_randn(g, 2, 3, 4, 8), _randn(g, 2, 3, 4, 8), _randn(g, 2, 3, 4, 8),
              causal_mask(4))),
        Case("a fully masked row", (_randn(g, 1, 3, 4), _randn(g, 1, 4, 4), _randn(g, 1, 4, 2),
                                    _mask_with_blocked_row(g, 1, 3, 4, row=1))),
        Case("length 1", (_randn(g, 1, 1, 2), _randn(g, 1, 1, 2), _randn(g, 1, 1, 3),
                          torch.ones(1, 1, 1, dtype=torch.bool))),
    ]


def _masked_softmax_cases(g):
    key_padding = torch.tensor([True, True, True, True, False, True]).view(2, 1, 1, 3)
    return [
        Case("a random mask", (2 * _randn(g, 2, 3, 5), _random_mask(g, 2, 3, 5))),
        Case("a causal mask broadcast over (B, h)", (2 * _randn(g, 2, 2, 4, 4), causal_mask(4))),
        Case("a (B, 1, 1, L) padding mask", (2 * _randn(g, 2, 2, 3, 3), key_padding)),
        Case("a fully masked row", (2 * _randn(g, 1, 3, 4),
                                    _mask_with_blocked_row(g, 1, 3, 4, row=1))),
        Case("length 1", (_randn(g, 1, 1, 1), torch.ones(1, 1, 1, dtype=torch.bool))),
        # a blocked key with a huge score: masking after the softmax cannot hide it
        Case("a blocked key scoring far above the others",
             (torch.tensor([[[1.0, 2.0, 80.0], [0.5, 90.0, 0.0]]]),
              torch.tensor([[[True, True, False], [True, False, True]]]))),
    ]


def _sinusoidal_cases(g):
    return [
        Case("max_len=10, d_model=8", (10, 8)),
        Case("max_len=50, d_model=16", (50, 16)),
        Case("base=100", (6, 4), {"base": 100.0}),
        Case("max_len=1, d_model=2", (1, 2)),
    ]


def _add_pe_cases(g):
    return [
        Case("L=5 < max_len=12", (_randn(g, 2, 5, 8), sinusoidal_encoding(12, 8))),
        Case("L = max_len", (_randn(g, 1, 3, 4), sinusoidal_encoding(3, 4))),
        Case("length 1", (_randn(g, 2, 1, 4), sinusoidal_encoding(6, 4))),
        Case("L = d_model", (_randn(g, 2, 8, 8), sinusoidal_encoding(16, 8))),
    ]


def _pe_rotation_cases(g):
    return [
        Case("k=1, d_model=4", (1, 4)),
        Case("k=3, d_model=8", (3, 8)),
        Case("k=5, d_model=16, base=100", (5, 16), {"base": 100.0}),
        Case("k=0 (the identity)", (0, 6)),
        Case("d_model=2", (2, 2)),
    ]


def _split_cases(g):
    return [
        Case("d_model=24, h=4 (d_k=6 != h)", (_randn(g, 2, 5, 24), 4)),
        Case("d_model=16, h=4 (d_k = h)", (_randn(g, 2, 3, 16), 4)),
        Case("length 1", (_randn(g, 1, 1, 8), 2)),
        Case("one head", (_randn(g, 2, 4, 6), 1)),
    ]


def _merge_cases(g):
    return [
        Case("h=4, d_k=6", (_randn(g, 2, 4, 5, 6),)),
        Case("h = d_k = 4", (_randn(g, 2, 4, 3, 4),)),
        Case("length 1", (_randn(g, 1, 2, 1, 3),)),
        Case("one head", (_randn(g, 2, 1, 4, 8),)),
    ]


def _layer_norm_cases(g):
    def gain_and_bias(d):  # not constant, so a scalar gain or bias shows
        return 1 + 0.5 * _randn(g, d), 0.5 * _randn(g, d)

    return [
        Case("random (2, 3, 6)", (1 + 3 * _randn(g, 2, 3, 6), *gain_and_bias(6))),
        Case("eps=0.1, small inputs", (0.3 * _randn(g, 2, 4, 5), *gain_and_bias(5)),
             {"eps": 0.1}),
        Case("d_model=2", (2 * _randn(g, 3, 2), *gain_and_bias(2))),
        Case("length 1", (_randn(g, 1, 1, 8), *gain_and_bias(8))),
        Case("constant features (variance 0)", (torch.full((1, 2, 4), 3.0), *gain_and_bias(4))),
    ]


def _feed_forward_cases(g):
    def weights(d_model, d_ff):
        return (_randn(g, d_model, d_ff), _randn(g, d_ff), _randn(g, d_ff, d_model),
                _randn(g, d_model))

    return [
        Case("d_model=4, d_ff=8", (_randn(g, 2, 3, 4), *weights(4, 8))),
        Case("d_ff = d_model = 5", (_randn(g, 2, 2, 5), *weights(5, 5))),
        Case("length 1", (_randn(g, 1, 1, 3), *weights(3, 6))),
    ]


def _causal_cases(g):
    return [Case(f"size {n}", (n,)) for n in (5, 1, 2, 8)]


def _padding_cases(g):
    return [
        Case("pad_id=0", (torch.tensor([[5, 3, 8, 0, 0], [2, 7, 1, 4, 6]]), 0)),
        Case("pad_id=1", (torch.tensor([[4, 9, 1, 1], [7, 2, 5, 1], [3, 1, 1, 1]]), 1)),
        Case("length 1", (torch.tensor([[7]]), 0)),
    ]


# ----------------------------------------------------------------------------------------------
# The registry
# ----------------------------------------------------------------------------------------------

_HINT_A1 = ("divide by the square root of the key dimension of one head: "
            "scores = q @ k^T / sqrt(d_k), with d_k = q.shape[-1].")
_HINT_A2 = ("mask the scores before softmax (masked_fill on the scores), so each row still "
            "sums to 1.")
_HINT_A3 = ("in this course True means may attend (the F.scaled_dot_product_attention "
            "convention): fill the scores where the mask is False.")
_HINT_A4 = "each query's weights over the keys must sum to 1: softmax over the last axis (dim=-1)."
_HINT_A5_NAN = ("what happens when a whole row is masked? softmax of a row of -inf is 0/0 = NaN; "
                "fill with torch.finfo(dtype).min and set such rows to 0.")
_HINT_A5_UNIFORM = ("what happens when a whole row is masked? Every key gets the same score, so "
                    "softmax spreads 1/Lk over keys it must not see: set such rows to 0.")
_HINT_H1 = ("did you split as view(B, L, h, d_k) and then transpose(1, 2)? Each head needs a "
            "contiguous block of d_k features.")

_ATTENTION_SOFTMAX_PITFALLS = (  # (id, name, masked softmax variant, hint), shared by two exercises
    ("A2", "mask after softmax (zeros)", _softmax_then_zero, _HINT_A2),
    ("A2", "mask after softmax (-inf)", _softmax_then_minus_inf, _HINT_A2),
    ("A4", "softmax over the queries", _softmax_over_queries, _HINT_A4),
    ("A5", "NaN for a fully masked row", _softmax_nan_rows, _HINT_A5_NAN),
    ("A5", "uniform weights for a fully masked row", _softmax_uniform_rows, _HINT_A5_UNIFORM),
)

EXERCISES: dict[str, Exercise] = {
    "scaled_dot_product_attention": Exercise(
        reference=scaled_dot_product_attention,
        make_cases=_attention_cases,
        outputs=("out", "weights"),
        sources=(scaled_dot_product_attention,),
        pitfalls=(
            Pitfall("A1", "no scaling", _attention_with(masked_softmax, lambda d_k: 1.0),
                    _HINT_A1),
            Pitfall("A1", "divided by d_k", _attention_with(masked_softmax, lambda d_k: d_k),
                    _HINT_A1),
            Pitfall("A3", "inverted mask", _attention_inverted_mask, _HINT_A3),
            *(Pitfall(pid, name, _attention_with(fn), hint)
              for pid, name, fn, hint in _ATTENTION_SOFTMAX_PITFALLS),
        ),
    ),
    "masked_softmax": Exercise(
        reference=masked_softmax,
        make_cases=_masked_softmax_cases,
        sources=(masked_softmax,),
        pitfalls=(
            Pitfall("A3", "inverted mask", _softmax_inverted_mask, _HINT_A3),
            *(Pitfall(*entry) for entry in _ATTENTION_SOFTMAX_PITFALLS),
        ),
    ),
    "sinusoidal_encoding": Exercise(
        reference=sinusoidal_encoding,
        make_cases=_sinusoidal_cases,
        sources=(sinusoidal_encoding,),
        atol=1e-4,
        pitfalls=(
            Pitfall("P1", "doubled exponent", _pe_doubled_exponent,
                    "the exponent is 2i/d_model where 2i is the even column index (0, 2, 4, ...): "
                    "do not double it again."),
            Pitfall("P2", "halves instead of interleaved", _pe_halves,
                    "even columns sin, odd columns cos (interleaved, not two halves)."),
            Pitfall("P3", "first frequency off by one", _pe_frequency_off_by_one,
                    "column 0 should be sin(position): the first pair has frequency 1."),
            Pitfall("P5", "sin and cos swapped", _pe_sin_cos_swapped,
                    "PE[0] should be 0, 1, 0, 1, ...: sin on even columns, cos on odd ones."),
        ),
    ),
    "add_positional_encoding": Exercise(
        reference=add_positional_encoding,
        make_cases=_add_pe_cases,
        sources=(add_positional_encoding, PositionalEncoding.forward),
        pitfalls=(
            Pitfall("P4", "sliced on the feature axis", _add_pe_slicing_features,
                    "slice positions, not features: pe[:L] keeps the first L rows (positions)."),
            Pitfall(None, "table not sliced", _add_pe_without_slicing,
                    "the table has max_len rows but the sequence has only L positions: "
                    "add pe[:L]."),
        ),
    ),
    "pe_rotation": Exercise(
        reference=pe_rotation,
        make_cases=_pe_rotation_cases,
        sources=(pe_rotation,),
        atol=1e-4,
        pitfalls=(
            Pitfall(None, "rotation by -k", _rotation_by_minus_k,
                    "your matrix rotates by -k (it gives PE[p - k]): check the signs, "
                    "sin(a + b) = sin a cos b + cos a sin b."),
            Pitfall("P2", "blocks on the two halves", _rotation_on_halves,
                    "PE interleaves its columns (even columns sin, odd columns cos), so each 2x2 "
                    "block couples columns 2i and 2i+1."),
        ),
    ),
    "split_heads": Exercise(
        reference=split_heads,
        make_cases=_split_cases,
        sources=(split_heads,),
        pitfalls=(
            Pitfall("H1", "view(B, L, d_k, h)", _split_view_d_k_h, _HINT_H1),
            Pitfall("H1", "view(B, L, d_k, h), heads moved forward", _split_strided, _HINT_H1),
            Pitfall("H1", "view(B, h, L, d_k) without transpose", _split_view_straight, _HINT_H1),
            Pitfall(None, "missing transpose", _split_missing_transpose,
                    "after view(B, L, h, d_k), swap the L and h axes with transpose(1, 2) "
                    "to get (B, h, L, d_k)."),
        ),
    ),
    "merge_heads": Exercise(
        reference=merge_heads,
        make_cases=_merge_cases,
        sources=(merge_heads,),
        pitfalls=(
            Pitfall("H2", "reshape without transposing back", _merge_without_transpose,
                    "transpose heads back next to d_k before reshaping: "
                    "(B, h, L, d_k) -> (B, L, h, d_k) -> (B, L, h * d_k)."),
            Pitfall(None, "view after transpose", _merge_view_after_transpose,
                    "after transpose the memory is no longer in order, so view fails: "
                    "use .reshape(...) or .contiguous().view(...)."),
        ),
    ),
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
        ),
    ),
    "feed_forward": Exercise(
        reference=feed_forward,
        make_cases=_feed_forward_cases,
        sources=(feed_forward, FeedForward.forward),
        pitfalls=(
            Pitfall(None, "no ReLU", _ff_no_relu,
                    "apply ReLU between the two layers: relu(x @ w1 + b1) @ w2 + b2 "
                    "(equation 2 of the paper)."),
            Pitfall(None, "ReLU after the second layer", _ff_relu_at_the_end,
                    "the second layer is linear, with no ReLU after it: outputs may be negative."),
            Pitfall(None, "transposed weights", _ff_transposed_weights,
                    "check the shapes: w1 is (d_model, d_ff) and w2 is (d_ff, d_model), so use "
                    "x @ w1 (nn.Linear stores the transpose and computes x @ W.T)."),
        ),
    ),
    "causal_mask": Exercise(
        reference=causal_mask,
        make_cases=_causal_cases,
        sources=(causal_mask,),
        pitfalls=(
            Pitfall("M1", "triu instead of tril", _causal_triu,
                    "position t may see positions 0..t: True on and below the diagonal (tril)."),
            Pitfall("M1", "True = blocked (triu, diagonal=1)", _causal_blocked_convention,
                    "position t may see positions 0..t; in this course True means may attend "
                    "(triu(diagonal=1) is nn.Transformer's True = blocked mask)."),
            Pitfall("M2", "diagonal excluded", _causal_without_diagonal,
                    "the diagonal must be allowed: a token may attend to itself."),
            Pitfall(None, "not a bool tensor", _causal_float,
                    "return a bool tensor (dtype=torch.bool), True = may attend."),
        ),
    ),
    "padding_mask": Exercise(
        reference=padding_mask,
        make_cases=_padding_cases,
        sources=(padding_mask,),
        pitfalls=(
            Pitfall("M3", "padding on the query axis", _padding_on_queries,
                    "hide the padded keys: shape (B, 1, 1, L)."),
            Pitfall("M3", "no singleton axes", _padding_without_axes,
                    "hide the padded keys: shape (B, 1, 1, L), which broadcasts over heads "
                    "and queries."),
            Pitfall("M4", "padding polarity", _padding_inverted,
                    "True means a real token you may attend to: tokens != pad_id."),
        ),
    ),
}


# ---- notebook 05: the encoder's input, and one sub-layer with its residual path and LayerNorm

def embed_tokens(tokens: torch.Tensor, weight: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    """The encoder's input: embedding rows times sqrt(d_model), plus the positional encoding.

    Shapes: ``tokens (B, L)`` ids, ``weight (V, d_model)``, ``pe (max_len, d_model)`` with
    ``max_len >= L``; result ``(B, L, d_model)``. ``Transformer`` in helpers/model.py does the same
    with ``nn.Embedding`` (notebook 08).
    """
    d_model = weight.shape[1]  # the width of a row; weight.shape[0] is the vocabulary size
    x = weight[tokens] * math.sqrt(d_model)  # (B, L, d_model): scale the tokens only (section 3.4)
    return x + pe[:tokens.shape[1]]  # the first L positions (rows), broadcast over the batch


def residual_sublayer(x: torch.Tensor, sublayer: Callable, norm: Callable,
                      norm_first: bool) -> torch.Tensor:
    """One sub-layer with its residual path and LayerNorm (section 3.1 of the paper).

    Post-norm (the paper, ``norm_first=False``): ``norm(x + sublayer(x))``. Pre-norm:
    ``x + sublayer(norm(x))``. ``EncoderLayer`` in helpers/layers.py does this twice, with
    self-attention and then the feed-forward network as the sub-layer (dropout aside).
    """
    if norm_first:
        return x + sublayer(norm(x))  # the residual path carries x itself, never normalised
    return norm(x + sublayer(x))  # add first, then normalise


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


def _embed_tokens_cases(g):
    def case(label, B, L, V, d_model, max_len):
        tokens = torch.randint(0, V, (B, L), generator=g)
        weight = _randn(g, V, d_model) * d_model ** -0.5  # helpers/model.py's N(0, 1/d_model)
        return Case(label, (tokens, weight, sinusoidal_encoding(max_len, d_model)))

    return [
        case("B=2, L=5, V=11, d_model=16, max_len=12", 2, 5, 11, 16, 12),
        case("d_model=4, L = max_len = 3, V=7", 1, 3, 7, 4, 3),
        case("length 1, V=5, d_model=8", 3, 1, 5, 8, 6),
        case("d_model=64, L=7, V=20", 2, 7, 20, 64, 10),
    ]


def _residual_sublayer_cases(g):
    def norm_fn(d):  # a LayerNorm with a gain and bias that differ per feature
        weight, bias = 1 + 0.5 * _randn(g, d), 0.5 * _randn(g, d)
        return lambda x: layer_norm(x, weight, bias)

    def ff_fn(d):  # a feed-forward sub-layer, equation (2)
        w1, b1, w2, b2 = _randn(g, d, 2 * d), _randn(g, 2 * d), _randn(g, 2 * d, d), _randn(g, d)
        return lambda x: feed_forward(x, w1 / math.sqrt(d), b1, w2 / math.sqrt(2 * d), b2)

    def attention_fn(d):  # a single-head self-attention sub-layer
        wq, wk, wv = (_randn(g, d, d) / math.sqrt(d) for _ in range(3))
        return lambda x: scaled_dot_product_attention(x @ wq, x @ wk, x @ wv)[0]

    return [
        Case("post-norm (norm_first=False), feed-forward sub-layer",
             (2 + 3 * _randn(g, 2, 4, 6), ff_fn(6), norm_fn(6), False)),
        Case("pre-norm (norm_first=True), feed-forward sub-layer",
             (2 + 3 * _randn(g, 2, 4, 6), ff_fn(6), norm_fn(6), True)),
        Case("post-norm, self-attention sub-layer",
             (2 * _randn(g, 2, 5, 8), attention_fn(8), norm_fn(8), False)),
        Case("pre-norm, self-attention sub-layer",
             (2 * _randn(g, 2, 5, 8), attention_fn(8), norm_fn(8), True)),
        Case("pre-norm, length 1", (1 + _randn(g, 1, 1, 4), ff_fn(4), norm_fn(4), True)),
    ]


_HINT_POST = ("post-norm (norm_first=False, the paper) adds first, then normalises: "
              "norm(x + sublayer(x)).")
_HINT_PRE = ("pre-norm (norm_first=True) normalises the sub-layer's input and adds the raw x: "
             "x + sublayer(norm(x)).")

EXERCISES["embed_tokens"] = Exercise(
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
    ),
)

EXERCISES["residual_sublayer"] = Exercise(
    reference=residual_sublayer,
    make_cases=_residual_sublayer_cases,
    sources=(residual_sublayer,),
    pitfalls=(
        Pitfall(None, "layouts swapped", _residual_layouts_swapped,
                "the two layouts are swapped: norm_first=True is pre-norm, x + sublayer(norm(x)); "
                "norm_first=False is the paper's post-norm, norm(x + sublayer(x))."),
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
    ),
)


# ---- notebook 07: the decoder's input (shift right) and cross-attention

def shift_right(target: torch.Tensor, bos_id: int) -> torch.Tensor:
    """Teacher forcing's decoder input: BOS, then the target without its last token.

    ``target (B, T)`` token ids -> ``(B, T)``: position t holds target token t - 1 (position 0
    holds ``bos_id``), so under the look-ahead mask position t sees only the tokens before the
    one it must predict. The labels stay ``target`` itself (section 3.1: "the output embeddings
    are offset by one position").
    """
    bos = torch.full_like(target[:, :1], bos_id)  # (B, 1), same dtype and device as target
    return torch.cat([bos, target[:, :-1]], dim=1)  # (B, 1) + (B, T - 1) -> (B, T)


def cross_attention(x: torch.Tensor, memory: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor,
                    w_v: torch.Tensor, memory_mask=None):
    """One head of the decoder's cross-attention (section 3.2.3), returning ``(out, weights)``.

    Queries from the decoder, keys and values from the encoder's output (the memory):
    ``x (B, T, d_model)``, ``memory (B, S, d_model)``, ``w_q``, ``w_k``, ``w_v (d_model, d_k)``,
    ``memory_mask`` None or bool ``(B, 1, S)``, True for a real source token. Returns ``out
    (B, T, d_k)`` and ``weights (B, T, S)``: one row per target position over the source.
    ``DecoderLayer._cross_attention`` in helpers/layers.py does this for every head at once.
    """
    q = x @ w_q  # (B, T, d_k): what each target position is looking for
    k, v = memory @ w_k, memory @ w_v  # (B, S, d_k): what the source offers
    # No look-ahead mask here: the whole source is known from the start; only padding is hidden.
    return scaled_dot_product_attention(q, k, v, memory_mask)


def _shift_none(target, bos_id):
    """T1: the target itself as the decoder input: position t sees the token it must predict."""
    return target.clone()


def _shift_left(target, bos_id):
    """Shifted left: the first token dropped and BOS put at the end."""
    return torch.cat([target[:, 1:], torch.full_like(target[:, :1], bos_id)], dim=1)


def _shift_drops_first(target, bos_id):
    """BOS in front, but the first target token dropped instead of the last (BOS overwrites y_0)."""
    return torch.cat([torch.full_like(target[:, :1], bos_id), target[:, 1:]], dim=1)


def _shift_keeps_all(target, bos_id):
    """BOS in front and nothing dropped: the input is one token longer than the labels."""
    return torch.cat([torch.full_like(target[:, :1], bos_id), target], dim=1)


def _shift_roll(target, bos_id):
    """``torch.roll``: shifted right, but the last token wraps around to position 0."""
    return torch.roll(target, shifts=1, dims=1)


def _cross_swapped(x, memory, w_q, w_k, w_v, memory_mask=None):
    """Queries from the memory, keys and values from the decoder: the arguments swapped."""
    return scaled_dot_product_attention(memory @ w_q, x @ w_k, x @ w_v, memory_mask)


def _cross_values_from_decoder(x, memory, w_q, w_k, w_v, memory_mask=None):
    """Keys from the memory but values from the decoder."""
    return scaled_dot_product_attention(x @ w_q, memory @ w_k, x @ w_v, memory_mask)


def _cross_is_self_attention(x, memory, w_q, w_k, w_v, memory_mask=None):
    """The memory never used: self-attention over the decoder's own positions."""
    return scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)


def _cross_mask_ignored(x, memory, w_q, w_k, w_v, memory_mask=None):
    """memory_mask never applied: every target position also reads the padded source tokens."""
    return scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ w_v)


def _cross_causal_memory(x, memory, w_q, w_k, w_v, memory_mask=None):
    """A look-ahead mask on the memory: target position t reads only source tokens 0..t."""
    T, S = x.shape[1], memory.shape[1]
    mask = torch.ones(T, S, dtype=torch.bool).tril()  # (T, S)
    if memory_mask is not None:
        mask = mask & memory_mask  # (T, S) & (B, 1, S) -> (B, T, S)
    return scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ w_v, mask)


def _cross_inverted_mask(x, memory, w_q, w_k, w_v, memory_mask=None):
    """A3: the memory mask used with True = blocked."""
    mask = None if memory_mask is None else ~memory_mask
    return scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ w_v, mask)


def _cross_scaled_by_d_model(x, memory, w_q, w_k, w_v, memory_mask=None):
    """A1: scores divided by sqrt(d_model), the width of x, instead of sqrt(d_k)."""
    q, k, v = x @ w_q, memory @ w_k, memory @ w_v
    scale = math.sqrt(x.shape[-1] / q.shape[-1])  # sdpa divides by sqrt(d_k); make it sqrt(d_model)
    return scaled_dot_product_attention(q / scale, k, v, memory_mask)


def _shift_right_cases(g):
    return [
        Case("B=2, T=5, bos_id=1", (torch.randint(3, 12, (2, 5), generator=g), 1)),
        Case("targets ending in EOS=2 and padding 0, bos_id=1",
             (torch.tensor([[5, 6, 7, 2, 0, 0], [8, 9, 2, 0, 0, 0]]), 1)),
        Case("length 1, bos_id=2", (torch.tensor([[7], [4]]), 2)),
        Case("B=3, T=4, bos_id=3", (torch.randint(4, 20, (3, 4), generator=g), 3)),
    ]


def _cross_attention_cases(g):
    def case(label, B, T, S, d_model, d_k, real=None):
        x, memory = _randn(g, B, T, d_model), _randn(g, B, S, d_model)
        weights = [_randn(g, d_model, d_k) / math.sqrt(d_model) * 2 for _ in range(3)]
        mask = None
        if real is not None:  # real[b] source tokens in sentence b, then padding
            mask = (torch.arange(S)[None, :] < torch.tensor(real)[:, None])[:, None, :]  # (B, 1, S)
        return Case(label, (x, memory, *weights), {} if mask is None else {"memory_mask": mask})

    return [
        case("T = S = 4, no mask", 2, 4, 4, 8, 8),
        case("T=3, S=5, source padding (B, 1, S), d_k=4", 2, 3, 5, 8, 4, real=[5, 3]),
        case("T=5, S=2, no mask", 1, 5, 2, 6, 6),
        case("T = S = 4, source padding, d_k=4", 2, 4, 4, 8, 4, real=[4, 2]),
        case("one target position, S=6 with padding", 2, 1, 6, 8, 8, real=[6, 4]),
    ]


_HINT_CROSS_SOURCES = ("q = x @ w_q (queries from the decoder), k = memory @ w_k and "
                       "v = memory @ w_v (keys and values from the encoder's memory).")

EXERCISES["shift_right"] = Exercise(
    reference=shift_right,
    make_cases=_shift_right_cases,
    sources=(shift_right,),
    pitfalls=(
        Pitfall("T1", "no shift", _shift_none,
                "shift the target right behind BOS: torch.cat([bos, target[:, :-1]], dim=1). "
                "Fed the target itself, position t sees the very token it must predict and the "
                "model learns to copy it (a teacher-forcing leak)."),
        Pitfall(None, "shifted left", _shift_left,
                "shift right, not left: BOS goes first and every target token moves one place "
                "later (position t holds token t - 1)."),
        Pitfall(None, "first token dropped", _shift_drops_first,
                "drop the last target token, not the first: the input is BOS, y_0, ..., y_(T-2), "
                "so y_0 is still read and position t holds token t - 1."),
        Pitfall(None, "nothing dropped", _shift_keeps_all,
                "keep the length T: after putting BOS in front, drop the last target token "
                "(target[:, :-1]); the labels stay the whole target."),
        Pitfall(None, "torch.roll", _shift_roll,
                "torch.roll wraps the last token around to position 0: put bos_id there "
                "instead (torch.cat with a column of bos_id)."),
    ),
)

EXERCISES["cross_attention"] = Exercise(
    reference=cross_attention,
    make_cases=_cross_attention_cases,
    outputs=("out", "weights"),
    sources=(cross_attention,),
    pitfalls=(
        Pitfall(None, "queries from the memory", _cross_swapped,
                "the arguments are swapped: " + _HINT_CROSS_SOURCES + " When S == T the swap "
                "raises no error: it is silently wrong."),
        Pitfall(None, "values from the decoder", _cross_values_from_decoder,
                "the values come from the memory too, like the keys: " + _HINT_CROSS_SOURCES),
        Pitfall(None, "memory unused", _cross_is_self_attention,
                "that is self-attention; cross-attention reads the encoder's memory: "
                + _HINT_CROSS_SOURCES),
        Pitfall(None, "memory mask ignored", _cross_mask_ignored,
                "pass memory_mask to the attention, so that no target position reads a padded "
                "source token."),
        Pitfall(None, "look-ahead mask on the memory", _cross_causal_memory,
                "the look-ahead mask belongs to the decoder's self-attention only: the whole "
                "source is known, so every target position may read every real source token "
                "(use memory_mask alone)."),
        Pitfall("A3", "inverted memory mask", _cross_inverted_mask, _HINT_A3),
        Pitfall("A1", "scaled by sqrt(d_model)", _cross_scaled_by_d_model,
                "divide by the square root of the key dimension of one head: d_k = "
                "w_k.shape[1], not d_model = x.shape[-1]."),
    ),
)


# ---- notebook 08: the model's parameter count; the output projection with a shared matrix
# isort: split
import functools  # noqa: E402
import numbers  # noqa: E402


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


@functools.wraps(count_parameters)
def _count_parameters_tensor(*args, **kwargs):
    """``count_parameters`` as a 0-d int64 tensor: ``check`` compares tensors (a learner may
    return a plain int, see :class:`_CountCase`)."""
    return torch.tensor(count_parameters(*args, **kwargs))


def output_projection(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Logits over the vocabulary from the decoder's output, with the embedding's own matrix.

    Shapes: ``x (..., d_model)``, ``weight (V, d_model)`` (the target embedding matrix, shared as
    in section 3.4 of the paper), ``bias (V,)``; result ``(..., V)``. ``Transformer(...,
    tie_weights=True)`` in helpers/model.py computes the same with ``self.generator``.
    """
    return x @ weight.T + bias  # one dot product per vocabulary row; no sqrt(d_model) here


class _CountCase(Case):
    """A case whose answer is a whole number. ``check`` compares tensors, so a plain int (or a
    float with a whole value, such as 1788.0) becomes a 0-d int64 tensor; other answers are
    left as they are, for the usual messages."""

    def run(self, fn: Callable) -> Any:
        result = super().run(fn)
        if isinstance(result, bool) or not isinstance(result, numbers.Real):
            return result
        if isinstance(result, numbers.Integral) or float(result).is_integer():
            return torch.tensor(int(result))
        return torch.tensor(float(result), dtype=torch.float64)


def _count_with(bias=True, norms=True, decoder_attentions=2, pe_rows=0, per_head=False,
                linears=2, generator="tgt", shared=False):
    """``count_parameters`` with one mistake: the keyword that differs from its default."""

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


def _count_cases(g):
    def case(d_model, num_heads, d_ff, num_layers, src_vocab, tgt_vocab, note=""):
        args = (d_model, num_heads, d_ff, num_layers, src_vocab, tgt_vocab)
        label = (f"d_model={d_model}, num_heads={num_heads}, d_ff={d_ff}, num_layers={num_layers}, "
                 f"src_vocab={src_vocab}, tgt_vocab={tgt_vocab}{note}")
        return _CountCase(label, args)

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
        weight = _randn(g, vocab, d_model) * d_model ** -0.5  # as helpers/model.py initialises E
        return Case(label, (_randn(g, *x_shape), weight, 0.5 * _randn(g, vocab)))

    return [
        case("B=2, T=3, d_model=8, V=11", (2, 3, 8), 11),
        case("V = d_model = 6", (1, 4, 6), 6),
        case("length 1, d_model=4, V=9", (1, 1, 4), 9),
        case("2-D input (T, d_model) = (5, 8), V=7", (5, 8), 7),
    ]


_HINT_LOGITS = ("return the logits themselves (any real numbers, one per vocabulary entry): the "
                "loss (notebook 09) and decoding (notebook 10) apply the (log-)softmax.")

EXERCISES["count_parameters"] = Exercise(
    reference=_count_parameters_tensor,
    make_cases=_count_cases,
    sources=(count_parameters,),
    outputs=("count",),
    atol=0.0,
    rtol=0.0,
    pitfalls=(
        Pitfall(None, "no biases", _count_with(bias=False),
                "every nn.Linear has a bias besides its weight: 4 d_model per attention block, "
                "d_ff + d_model per feed-forward network, tgt_vocab for the output projection."),
        Pitfall(None, "no LayerNorm", _count_with(norms=False),
                "each LayerNorm learns a gain and a bias per feature (2 d_model numbers): two in "
                "an encoder layer, three in a decoder layer."),
        Pitfall(None, "one attention per decoder layer", _count_with(decoder_attentions=1),
                "a decoder layer has two attention blocks, masked self-attention and "
                "cross-attention over the memory (section 3.1), each 4 (d_model² + d_model)."),
        Pitfall(None, "positional encoding counted", _count_with(pe_rows=5000),
                "the sinusoidal positional encoding is a fixed table (a buffer), not learned: "
                "it adds no parameters."),
        Pitfall(None, "attention counted once per head", _count_with(per_head=True),
                "the heads share d_model out (d_k = d_model / h each): W_Q, W_K, W_V and W_O are "
                "d_model x d_model in all, so the count does not depend on num_heads."),
        Pitfall(None, "one linear layer in the feed-forward network", _count_with(linears=1),
                "the feed-forward network has two linear layers, d_model -> d_ff -> d_model "
                "(equation 2): 2 d_model d_ff + d_ff + d_model."),
        Pitfall(None, "output projection forgotten", _count_with(generator=None),
                "the model ends with the output projection, nn.Linear(d_model, tgt_vocab): "
                "tgt_vocab x d_model weights plus tgt_vocab biases."),
        Pitfall(None, "a vocabulary matrix shared", _count_with(shared=True),
                "this model keeps three separate matrices (tie_weights=False): the source "
                "embedding (src_vocab x d_model), the target embedding and the output projection "
                "(tgt_vocab x d_model each)."),
        Pitfall(None, "output projection over the source vocabulary", _count_with(generator="src"),
                "the output projection scores target tokens: tgt_vocab x d_model weights plus "
                "tgt_vocab biases."),
    ),
)

EXERCISES["output_projection"] = Exercise(
    reference=output_projection,
    make_cases=_projection_cases,
    sources=(output_projection,),
    outputs=("logits",),
    pitfalls=(
        Pitfall(None, "softmax applied", _projection_softmax, _HINT_LOGITS),
        Pitfall(None, "log-softmax applied", _projection_log_softmax, _HINT_LOGITS),
        Pitfall(None, "weight not transposed", _projection_not_transposed,
                "weight is the (V, d_model) embedding matrix: logits = x @ weight.T + bias, one "
                "dot product per vocabulary row."),
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
)


# ---- notebook 09: the warm-up learning rate and label-smoothed cross-entropy
# isort: split
from .training import label_smoothed_nll, transformer_lr  # noqa: E402


@functools.wraps(transformer_lr)
def _transformer_lr_tensor(step, d_model, warmup):
    """``transformer_lr`` as a 0-d float32 tensor: ``check`` compares tensors (a learner may
    return a plain float, see :class:`_RateCase`)."""
    return torch.tensor(transformer_lr(step, d_model, warmup), dtype=torch.float32)


class _RateCase(Case):
    """A case whose answer is one number: a plain float (or int) becomes a 0-d float32 tensor;
    other answers are left as they are, for the usual messages."""

    def run(self, fn: Callable) -> Any:
        result = super().run(fn)
        if isinstance(result, numbers.Real) and not isinstance(result, bool):
            return torch.tensor(float(result), dtype=torch.float32)
        return result


def _lr_with(offset=0, pick=min, step_exponent=-0.5, warmup_exponent=-1.5, d_exponent=-0.5):
    """``transformer_lr`` with one mistake: the keyword that differs from its default."""

    def lr(step, d_model, warmup):
        step = step + offset
        return d_model ** d_exponent * pick(step ** step_exponent, step * warmup ** warmup_exponent)

    return lr


def _lr_swapped(step, d_model, warmup):
    """The two exponents swapped: ``min(step^-1.5, step * warmup^-0.5)``."""
    return d_model ** -0.5 * min(step ** -1.5, step * warmup ** -0.5)


def _lr_cases(g):
    def case(step, d_model, warmup, note=""):
        return _RateCase(f"step={step}, d_model={d_model}, warmup={warmup}{note}",
                         (step, d_model, warmup))

    return [
        case(1, 512, 4000, " (the first step)"),
        case(4000, 512, 4000, " (the peak, the paper's setting)"),
        case(100000, 512, 4000, " (long after the peak)"),
        case(50, 64, 200),
        case(200, 64, 200, " (the peak)"),
        case(1000, 64, 200),
        case(7, 16, 3),
    ]


def _ls_spread_over_others(logits, labels, epsilon, ignore_index):
    """epsilon spread over the V - 1 wrong tokens only (1 - epsilon on the right one)."""
    log_probs = logits.reshape(-1, logits.shape[-1]).log_softmax(dim=-1)
    labels = labels.reshape(-1)
    keep = labels != ignore_index
    nll = -log_probs.gather(1, labels.masked_fill(~keep, 0)[:, None]).squeeze(1)
    others = (-log_probs.sum(dim=-1) - nll) / (log_probs.shape[-1] - 1)
    per_token = (1 - epsilon) * nll + epsilon * others
    return per_token[keep].sum() / keep.sum()


def _ls_parts(logits, labels, ignore_index):
    """(nll, uniform, keep) per position, as in the reference."""
    log_probs = logits.reshape(-1, logits.shape[-1]).log_softmax(dim=-1)
    labels = labels.reshape(-1)
    keep = labels != ignore_index
    nll = -log_probs.gather(1, labels.masked_fill(~keep, 0)[:, None]).squeeze(1)
    return nll, -log_probs.mean(dim=-1), keep


def _ls_smoothing_on_pads(logits, labels, epsilon, ignore_index):
    """T3: the right-token term is masked on padding, the smoothing term is not."""
    nll, uniform, keep = _ls_parts(logits, labels, ignore_index)
    return ((1 - epsilon) * nll * keep + epsilon * uniform).sum() / keep.sum()


def _ls_pads_not_ignored(logits, labels, epsilon, ignore_index):
    """Padding scored like a real label (``ignore_index`` unused): the mean over every position."""
    log_probs = logits.reshape(-1, logits.shape[-1]).log_softmax(dim=-1)
    labels = labels.reshape(-1).clamp(min=0)  # -100 is no index: scored as token 0
    nll = -log_probs.gather(1, labels[:, None]).squeeze(1)
    return ((1 - epsilon) * nll + epsilon * -log_probs.mean(dim=-1)).mean()


def _ls_divided_by_all(logits, labels, epsilon, ignore_index):
    """Padding masked out of the sum, but the sum divided by every position, pads included."""
    nll, uniform, keep = _ls_parts(logits, labels, ignore_index)
    return ((1 - epsilon) * nll + epsilon * uniform)[keep].sum() / keep.numel()


def _ls_summed(logits, labels, epsilon, ignore_index):
    """Summed over the real tokens instead of averaged."""
    nll, uniform, keep = _ls_parts(logits, labels, ignore_index)
    return ((1 - epsilon) * nll + epsilon * uniform)[keep].sum()


def _ls_kl_log_of_zero(logits, labels, epsilon, ignore_index):
    """T3: KL(q || p) with ``q * log(q)``: 0 * log(0) = NaN wherever the target is 0."""
    V = logits.shape[-1]
    log_probs = logits.reshape(-1, V).log_softmax(dim=-1)
    labels = labels.reshape(-1)
    keep = labels != ignore_index
    q = torch.full_like(log_probs, epsilon / V)
    q.scatter_(1, labels.masked_fill(~keep, 0)[:, None], 1 - epsilon + epsilon / V)
    return (q * (q.log() - log_probs)).sum(dim=-1)[keep].mean()


def _ls_kl(logits, labels, epsilon, ignore_index):
    """A KL divergence (``F.kl_div``): finite, but lower than cross-entropy by H(q)."""
    V = logits.shape[-1]
    log_probs = logits.reshape(-1, V).log_softmax(dim=-1)
    labels = labels.reshape(-1)
    keep = labels != ignore_index
    q = torch.full_like(log_probs, epsilon / V)
    q.scatter_(1, labels.masked_fill(~keep, 0)[:, None], 1 - epsilon + epsilon / V)
    kl = torch.nn.functional.kl_div(log_probs, q, reduction="none").sum(dim=-1)
    return kl[keep].mean()


def _ls_cases(g):
    def case(label, shape, V, epsilon, ignore_index, pads=()):
        logits = 2.0 * _randn(g, *shape, V)
        labels = torch.randint(4, V, shape, generator=g)  # 4..V-1: never a special id
        for index in pads:
            labels[index] = ignore_index
        return Case(f"{label}, epsilon={epsilon}, ignore_index={ignore_index}",
                    (logits, labels, epsilon, ignore_index))

    return [
        case("B=2, T=5, V=7, padding at the end of sentence 1", (2, 5), 7, 0.1, 0,
             [(1, 3), (1, 4)]),
        case("2-D logits (N, V) = (6, 9), nothing ignored", (6,), 9, 0.2, -100),
        case("epsilon=0 is plain cross-entropy; B=2, T=4, V=6", (2, 4), 6, 0.0, 0,
             [(0, 3), (1, 2), (1, 3)]),
        case("mostly padding: B=3, T=6, V=8", (3, 6), 8, 0.1, 0,
             [(0, 2), (0, 3), (0, 4), (0, 5), (1, 4), (1, 5), (2, 1), (2, 2), (2, 3), (2, 4),
              (2, 5)]),
        case("pad id 2: B=2, T=3, V=10", (2, 3), 10, 0.3, 2, [(0, 2)]),
    ]


_HINT_PADS = ("a padded position is not a word to predict: leave out every position whose label "
              "is ignore_index, then average over the real tokens only.")

EXERCISES["transformer_lr"] = Exercise(
    reference=_transformer_lr_tensor,
    make_cases=_lr_cases,
    sources=(transformer_lr,),
    outputs=("lr",),
    atol=0.0,
    rtol=1e-5,
    pitfalls=(
        Pitfall(None, "steps counted from 0", _lr_with(offset=-1),
                "the paper counts steps from 1 (step^-0.5 divides by zero at step 0). "
                "LambdaLR starts at 0, so helpers.training.warmup_schedule passes step + 1."),
        Pitfall(None, "max instead of min", _lr_with(pick=max),
                "take the min of the two arms: the linear warm-up (step * warmup^-1.5) is the "
                "smaller one until step = warmup, the 1/sqrt(step) decay after it."),
        Pitfall(None, "exponents swapped", _lr_swapped,
                "step^-0.5 is the decay and step * warmup^-1.5 the linear warm-up; with the "
                "exponents swapped the two arms no longer meet at step = warmup."),
        Pitfall(None, "warmup^-0.5", _lr_with(warmup_exponent=-0.5),
                "the warm-up arm is step * warmup^-1.5, so that it meets step^-0.5 exactly at "
                "step = warmup (warmup * warmup^-1.5 = warmup^-0.5)."),
        Pitfall(None, "no d_model factor", _lr_with(d_exponent=0.0),
                "multiply by d_model^-0.5: wider models get smaller steps."),
        Pitfall(None, "sqrt(d_model) instead of its inverse", _lr_with(d_exponent=0.5),
                "the factor is d_model^-0.5 = 1 / sqrt(d_model), not sqrt(d_model)."),
    ),
)

EXERCISES["label_smoothed_nll"] = Exercise(
    reference=label_smoothed_nll,
    make_cases=_ls_cases,
    sources=(label_smoothed_nll,),
    outputs=("loss",),
    pitfalls=(
        Pitfall("T3", "smoothing term kept on padding", _ls_smoothing_on_pads,
                "padded positions carry no loss at all, not even the epsilon share of the "
                "smoothing: mask the whole per-position loss, not only the -log p[label] term."),
        Pitfall("T3", "KL divergence with log(0)", _ls_kl_log_of_zero,
                "q * log(q) is 0 * log(0) = NaN where the target is 0 (epsilon = 0). Compute "
                "the cross-entropy -sum q log p with log_softmax, which stays finite."),
        Pitfall(None, "KL divergence instead of cross-entropy", _ls_kl,
                "a KL divergence is the cross-entropy minus the entropy of the smoothed target: "
                "the same gradients, but not the loss F.cross_entropy reports. Return the "
                "cross-entropy -sum_v q_v log p_v."),
        Pitfall(None, "epsilon spread over V - 1 tokens", _ls_spread_over_others,
                "F.cross_entropy(label_smoothing=epsilon) spreads epsilon over all V tokens, the "
                "right one included: q = (1 - epsilon) one-hot + epsilon / V."),
        Pitfall(None, "padding not ignored", _ls_pads_not_ignored, _HINT_PADS),
        Pitfall(None, "divided by every position", _ls_divided_by_all,
                "divide by the number of real (non-ignored) tokens, not by every position: "
                "otherwise a batch with more padding gets a smaller loss."),
        Pitfall(None, "summed instead of averaged", _ls_summed,
                "average over the real tokens (as F.cross_entropy does with reduction='mean'), "
                "so that the loss does not grow with the batch size."),
    ),
)


# ---- notebook 10: one step of beam search, and the length-penalised score

def beam_step(sums: torch.Tensor, log_probs: torch.Tensor, finished: torch.Tensor,
              beam_size: int, eos_id: int):
    """One step of beam search over ``n`` hypotheses: the ``beam_size`` best continuations.

    ``sums (n,)`` are the hypotheses' summed log-probabilities, ``log_probs (n, V)`` the model's
    next-token log-probabilities, ``finished (n,)`` True where a hypothesis already ended with
    EOS: it is not extended, it competes as it is (token ``eos_id``, score unchanged). Returns
    ``(rows, tokens, scores)``, each ``(beam_size,)``, best first: which hypothesis each
    candidate extends, the token it adds and its new summed log-probability. The best are
    chosen over all ``n * V`` candidates at once, not per hypothesis.
    """
    candidates = sums[:, None] + log_probs  # (n, V): log p(prefix) + log p(token | prefix)
    stay = torch.full_like(log_probs, float("-inf"))
    stay[:, eos_id] = sums  # a finished hypothesis has one candidate: itself
    candidates = torch.where(finished[:, None], stay, candidates)
    scores, index = candidates.flatten().topk(beam_size)  # (n * V,) -> (beam_size,), sorted
    V = log_probs.shape[-1]
    return index // V, index % V, scores


def length_penalized_score(log_probs: torch.Tensor, alpha: float) -> torch.Tensor:
    """``sum(log p) / L ** alpha`` for the ``L`` token log-probabilities of one hypothesis
    (EOS included). ``alpha = 0`` is the plain sum, ``alpha = 1`` the mean log-probability."""
    return log_probs.sum() / log_probs.shape[-1] ** alpha


def _beam_candidates(sums, log_probs, finished, eos_id, extend_finished=False,
                     drop_finished=False):
    candidates = sums[:, None] + log_probs
    if extend_finished:
        return candidates
    stay = torch.full_like(log_probs, float("-inf"))
    if not drop_finished:
        stay[:, eos_id] = sums
    return torch.where(finished[:, None], stay, candidates)


def _beam_pick(candidates, beam_size):
    scores, index = candidates.flatten().topk(beam_size)
    V = candidates.shape[-1]
    return index // V, index % V, scores


def _beam_probabilities_added(sums, log_probs, finished, beam_size, eos_id):
    """D1: probabilities added instead of log-probabilities."""
    probs = sums.exp()[:, None] + log_probs.exp()
    stay = torch.full_like(probs, float("-inf"))
    stay[:, eos_id] = sums.exp()
    return _beam_pick(torch.where(finished[:, None], stay, probs), beam_size)


def _beam_probabilities_multiplied(sums, log_probs, finished, beam_size, eos_id):
    """D1: probabilities multiplied: the right order until they underflow to 0."""
    probs = sums.exp()[:, None] * log_probs.exp()
    stay = torch.full_like(probs, float("-inf"))
    stay[:, eos_id] = sums.exp()
    return _beam_pick(torch.where(finished[:, None], stay, probs), beam_size)


def _beam_log_probs_multiplied(sums, log_probs, finished, beam_size, eos_id):
    """D1: log-probabilities multiplied, as if they were probabilities."""
    candidates = sums[:, None] * log_probs
    stay = torch.full_like(log_probs, float("-inf"))
    stay[:, eos_id] = sums
    return _beam_pick(torch.where(finished[:, None], stay, candidates), beam_size)


def _beam_extends_finished(sums, log_probs, finished, beam_size, eos_id):
    """D2: finished hypotheses extended like the others."""
    return _beam_pick(_beam_candidates(sums, log_probs, finished, eos_id, True), beam_size)


def _beam_drops_finished(sums, log_probs, finished, beam_size, eos_id):
    """D2: finished hypotheses dropped."""
    return _beam_pick(_beam_candidates(sums, log_probs, finished, eos_id, drop_finished=True),
                      beam_size)


def _beam_per_hypothesis(sums, log_probs, finished, beam_size, eos_id):
    """The best continuations of each hypothesis on its own (ceil(beam_size / n) each)."""
    candidates = _beam_candidates(sums, log_probs, finished, eos_id)
    n, V = candidates.shape
    scores, tokens = candidates.topk(min(-(-beam_size // n), V), dim=-1)  # (n, per_row)
    rows = torch.arange(n)[:, None].expand_as(tokens)
    order = scores.flatten().argsort(descending=True)[:beam_size]
    return rows.flatten()[order], tokens.flatten()[order], scores.flatten()[order]


def _beam_not_cumulative(sums, log_probs, finished, beam_size, eos_id):
    """The new token's log-probability alone, without the hypothesis' sum."""
    zeros = torch.zeros_like(sums)
    return _beam_pick(_beam_candidates(zeros, log_probs, finished, eos_id), beam_size)


def _score_with(reduce):
    def score(log_probs, alpha):
        return reduce(log_probs, alpha, log_probs.shape[-1])
    return score


def _beam_step_cases(g):
    def case(label, sums, V, finished, beam_size, eos_id=2, spread=2.0):
        sums = torch.tensor(sums)
        log_probs = (spread * _randn(g, len(sums), V)).log_softmax(dim=-1)
        return Case(f"{label}; n={len(sums)}, V={V}, beam_size={beam_size}",
                    (sums, log_probs, torch.tensor(finished), beam_size, eos_id))

    return [
        case("the first step (one hypothesis, sum 0)", [0.0], 9, [False], 3),
        case("three hypotheses, none finished", [-0.5, -1.0, -4.0], 8, [False] * 3, 3),
        case("one hypothesis far ahead of the others", [-0.1, -6.0, -7.0], 7, [False] * 3, 3,
             spread=0.5),
        case("a finished hypothesis with the best score", [-1.0, -2.0, -2.5], 6,
             [True, False, False], 3),
        case("long hypotheses (sums near -800: probabilities underflow)",
             [-800.0, -801.0], 7, [False, False], 4),
    ]


def _length_penalty_cases(g):
    def case(label, L, alpha, scale=1.5):
        log_probs = (scale * _randn(g, L, 10)).log_softmax(dim=-1)[:, 0]  # (L,) all <= 0
        return _RateCase(f"{label}: L={L}, alpha={alpha}", (log_probs, alpha))

    return [
        case("a short hypothesis", 5, 0.6),
        case("alpha = 0: the plain sum", 6, 0.0),
        case("alpha = 1: the mean", 4, 1.0),
        case("one token", 1, 0.6),
        case("a long hypothesis (the product of probabilities underflows)", 400, 0.7, scale=6.0),
    ]


_HINT_D1 = ("work with log-probabilities: a hypothesis' score is the SUM of its tokens' log p "
            "(the log of the product of probabilities), and log p(prefix) + log p(token | prefix) "
            "never underflows.")

EXERCISES["beam_step"] = Exercise(
    reference=beam_step,
    make_cases=_beam_step_cases,
    sources=(beam_step,),
    outputs=("rows", "tokens", "scores"),
    pitfalls=(
        Pitfall("D1", "probabilities added", _beam_probabilities_added, _HINT_D1),
        Pitfall("D1", "probabilities multiplied", _beam_probabilities_multiplied,
                "multiplying probabilities is right in theory, but after a few hundred tokens "
                "the products underflow to 0 and every candidate ties: " + _HINT_D1),
        Pitfall("D1", "log-probabilities multiplied", _beam_log_probs_multiplied,
                "log turns products into sums: log p(prefix + token) = sums + log_probs, "
                "not sums * log_probs."),
        Pitfall("D2", "finished hypotheses extended", _beam_extends_finished,
                "a finished hypothesis (it ended with EOS) must not grow: it competes as it is, "
                "with one candidate (token eos_id, score unchanged)."),
        Pitfall("D2", "finished hypotheses dropped", _beam_drops_finished,
                "do not throw finished hypotheses away: they compete as they are (token eos_id, "
                "score unchanged), and may well be the best."),
        Pitfall(None, "best continuations per hypothesis", _beam_per_hypothesis,
                "choose the beam_size best candidates over ALL n * V continuations at once "
                "(flatten, then topk): one strong hypothesis may supply several of them."),
        Pitfall(None, "scores not cumulative", _beam_not_cumulative,
                "a candidate's score is the hypothesis' sum PLUS the new token's log-probability "
                "(sums[:, None] + log_probs), not the new token's alone."),
    ),
)

EXERCISES["length_penalized_score"] = Exercise(
    reference=length_penalized_score,
    make_cases=_length_penalty_cases,
    sources=(length_penalized_score,),
    outputs=("score",),
    pitfalls=(
        Pitfall("D1", "probabilities summed", _score_with(lambda lp, a, L: lp.exp().sum() / L ** a),
                _HINT_D1),
        Pitfall("D1", "probabilities multiplied",
                _score_with(lambda lp, a, L: lp.exp().prod() / L ** a),
                "the product of probabilities underflows to 0 for long hypotheses: " + _HINT_D1),
        Pitfall(None, "no length penalty", _score_with(lambda lp, a, L: lp.sum()),
                "divide the sum by L ** alpha (L tokens, EOS included): only alpha = 0 leaves "
                "the plain sum."),
        Pitfall(None, "multiplied by the length", _score_with(lambda lp, a, L: lp.sum() * L ** a),
                "divide by L ** alpha: the sum is negative and grows with L, and dividing is "
                "what lifts long hypotheses."),
        Pitfall(None, "always the mean", _score_with(lambda lp, a, L: lp.sum() / L),
                "the exponent alpha matters: sum / L ** alpha (alpha = 1 only gives the mean)."),
    ),
)

# ----------------------------------------------------------------------------------------------
# Notebook 11: reading attention maps
# ----------------------------------------------------------------------------------------------

def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy in bits of each query's attention, ``(..., Lq, Lk) -> (..., Lq)``, as notebook 11.

    0: the query looks at one key (a sharp head); ``log2(Lk)``: it spreads evenly. A weight of 0
    (a masked key) adds nothing, as 0 * log 0 is taken to be 0.
    """
    logs = weights.clamp_min(torch.finfo(weights.dtype).tiny).log2()  # finite even where w = 0
    return -(weights * logs).sum(dim=-1)  # sum over the keys


def _entropy_cases(gen: torch.Generator) -> list:
    def weights(*shape, blocked=0):
        scores = torch.randn(*shape, generator=gen) * 2
        if blocked:  # the last keys masked, as padding would be: exact zeros in the weights
            scores[..., -blocked:] = float("-inf")
        return scores.softmax(dim=-1)

    return [Case("one head, 4 queries x 6 keys", (weights(4, 6),)),
            Case("2 sentences x 4 heads, 5 queries x 7 keys", (weights(2, 4, 5, 7),)),
            Case("2 padded keys: weights exactly 0", (weights(3, 5, 6, blocked=2),)),
            Case("one-hot rows: entropy 0", (torch.eye(4),))]


def source_alignment(cross_weights: torch.Tensor) -> torch.Tensor:
    """For each target position, the source position it attends to most: ``(T, S) -> (T,)``."""
    return cross_weights.argmax(dim=-1)  # over the source positions (the keys)


def _alignment_cases(gen: torch.Generator) -> list:
    def weights(t, s):
        return (torch.randn(t, s, generator=gen) * 3).softmax(dim=-1)

    return [Case("5 target x 7 source words", (weights(5, 7),)),
            Case("7 target x 4 source words", (weights(7, 4),)),
            Case("4 x 4, a reordering", (torch.eye(4)[[0, 2, 1, 3]] * 0.7 + 0.075,))]


EXERCISES["attention_entropy"] = Exercise(
    reference=attention_entropy,
    make_cases=_entropy_cases,
    sources=(attention_entropy,),
    outputs=("entropy",),
    pitfalls=(
        Pitfall(None, "log of exact zeros", lambda w: -(w * w.log2()).sum(dim=-1),
                "0 * log(0) is NaN in floating point: a masked key (weight 0) must add 0. Clamp "
                "the weights to a tiny positive number before the log (or use torch.xlogy)."),
        Pitfall(None, "no minus sign", lambda w: (w * w.clamp_min(1e-38).log2()).sum(dim=-1),
                "log p <= 0, so the entropy -sum p log p needs the minus sign to be >= 0."),
        Pitfall(None, "nats instead of bits",
                lambda w: -(w * w.clamp_min(1e-38).log()).sum(dim=-1),
                "notebook 11 measures entropy in bits (log2, as in section 6's table), so a "
                "uniform head over Lk keys scores log2(Lk), not the natural log(Lk)."),
        Pitfall(None, "summed over the queries",
                lambda w: -(w * w.clamp_min(1e-38).log2()).sum(dim=-2),
                "each query has its own distribution over the KEYS (the last axis): sum there."),
    ),
)

EXERCISES["source_alignment"] = Exercise(
    reference=source_alignment,
    make_cases=_alignment_cases,
    sources=(source_alignment,),
    outputs=("alignment",),
    pitfalls=(
        Pitfall(None, "argmax over the targets", lambda w: w.argmax(dim=0),
                "each row of a cross-attention map is one TARGET word's weights over the source "
                "words: take the argmax along the last axis (dim=-1)."),
        Pitfall(None, "the weight instead of its position", lambda w: w.max(dim=-1).values,
                "return WHERE the largest weight is (an index: argmax), not how large it is."),
    ),
)


# ----------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------

def check(name: str, fn: Callable, time_limit: float | None = None) -> bool:
    """Run ``fn`` against the reference of exercise ``name``; print one message; True if right.

    ``time_limit``: seconds per call of ``fn`` (default ``TIME_LIMIT``; ``math.inf``: none).
    Never raises for a wrong answer. Raises ``ValueError`` only for an unknown exercise name or
    a time limit that is not a positive number.
    """
    exercise = _lookup(name)
    limit = TIME_LIMIT if time_limit is None else time_limit
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0:
        raise ValueError(f"time_limit must be a number of seconds > 0 (math.inf: no limit), "
                         f"got {limit!r}")
    if not callable(fn):
        print(f"{FAIL} {name}: check expects your function itself, e.g. "
              f'check("{name}", my_function) without parentheses; got {_describe(fn)}.')
        return False
    cases = exercise.cases()
    given = []
    for case in cases:
        given.append(_call_learner(fn, case, limit))
        if isinstance(given[-1], _TimedOut):
            print(f"{FAIL} {name}: your function did not return within {limit:g} s "
                  f"[case: {case.describe()}]\n   {HINT} Look for a loop that never ends (a "
                  "while loop whose condition never changes?). Python cannot stop the call from "
                  "outside: it goes on in the background, so if the kernel stays busy, restart "
                  f'it. For a slow but correct function: check("{name}", fn, time_limit=60).')
            return False
    not_implemented = [isinstance(g, _Raised) and isinstance(g.error, NotImplementedError)
                       for g in given]
    if all(not_implemented) or (all(map(_is_blank, given)) and _is_stub(fn)):
        print(f"{TODO} {name}: not attempted yet. Write your code in the function, run its "
              "cell, then run this check again.")
        return False
    problems = [_difference(exercise, _call(exercise.reference, case), result)
                for case, result in zip(cases, given, strict=True)]
    bad = [i for i, problem in enumerate(problems) if problem is not None]
    if not bad:
        tested = "; ".join(case.label for case in cases)
        print(f"{PASS} {name}: correct on all {len(cases)} test cases ({tested}). Well done!")
        return True
    first = bad[0]
    headline = f"{FAIL} {name}: {problems[first].message} [case: {cases[first].describe()}]"
    pitfall = _diagnose(exercise, cases, given, first)
    if not_implemented[first]:
        advice = ("This case reaches a part of your function that still raises "
                  "NotImplementedError (other cases return a value): finish that branch.")
    elif pitfall is None:
        advice = problems[first].advice
        advice = f'{advice[0].upper()}{advice[1:]}; solution("{name}") shows one answer.'
    else:
        tag = f" [{pitfall.id}]" if pitfall.id else ""
        advice = f"Hint{tag}: {pitfall.hint}"
    print(f"{headline}\n   {HINT} {advice}")
    return False


def solution(name: str) -> None:
    """Print the reference code behind exercise ``name``, each piece headed by where it lives.

    Raises ``ValueError`` for an unknown exercise name.
    """
    exercise = _lookup(name)
    blocks = [f"# From {_where(fn)}\n{textwrap.dedent(inspect.getsource(fn)).rstrip()}"
              for fn in exercise.sources]
    print("\n\n".join(blocks))


# ----------------------------------------------------------------------------------------------
# Machinery
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Raised:
    """What a call raised, kept so that a raising learner can still be matched to a variant."""

    error: Exception

    def describe(self) -> str:
        lines = str(self.error).strip().splitlines()
        message = _no_addresses(lines[0]) if lines else ""
        if len(message) > 150:
            message = message[:147] + "..."
        return f"{type(self.error).__name__}: {message}" if message else type(self.error).__name__


def _lookup(name: str) -> Exercise:
    if name not in EXERCISES:
        known = ", ".join(sorted(EXERCISES))
        raise ValueError(f"unknown exercise {name!r}; known exercises: {known}")
    return EXERCISES[name]


def _call(fn: Callable, case: Case) -> Any:
    """Run ``fn`` on ``case`` quietly; an exception becomes a :class:`_Raised`."""
    with contextlib.redirect_stdout(io.StringIO()):
        return _outcome(fn, case)


def _outcome(fn: Callable, case: Case) -> Any:
    try:
        return case.run(fn)
    except (Exception, SystemExit) as error:  # a wrong answer, not a crash of the checker
        return _Raised(error)


@dataclass(frozen=True)
class _TimedOut:
    seconds: float


def _call_learner(fn: Callable, case: Case, limit: float) -> Any:
    """:func:`_call` with a time limit: ``fn`` runs in a daemon thread, joined for ``limit``
    seconds (signal.alarm would not work on Windows, nor outside the main thread). A thread
    cannot be killed, so a function that never returns goes on running in the background."""
    if math.isinf(limit):
        return _call(fn, case)
    result = []

    def run():
        try:
            result.append(_outcome(fn, case))
        except BaseException as error:  # even KeyboardInterrupt: raised by fn, not by the user
            result.append(_Raised(error))

    worker = threading.Thread(target=run, daemon=True, name=f"check: {case.label}")
    with contextlib.redirect_stdout(io.StringIO()):  # here, so that it ends on time
        worker.start()
        worker.join(limit)
    return result[0] if result else _TimedOut(limit)


_PLACEHOLDER_VALUES = (None, Ellipsis)


def _is_placeholder(node: ast.AST) -> bool:
    """``None``, ``...`` or a tuple of them: what a stub returns."""
    if isinstance(node, ast.Tuple):
        return all(map(_is_placeholder, node.elts))
    return node is None or (isinstance(node, ast.Constant) and node.value in _PLACEHOLDER_VALUES)


def _is_stub_statement(node: ast.stmt) -> bool:
    if isinstance(node, ast.Pass):
        return True
    if isinstance(node, ast.Expr):  # a docstring, a bare string or ...
        value = node.value.value if isinstance(node.value, ast.Constant) else None
        return isinstance(value, str) or value is Ellipsis
    if isinstance(node, ast.Return):
        return _is_placeholder(node.value)
    if isinstance(node, ast.Raise):
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def _definition(fn: Callable) -> ast.AST | None:
    """The parsed ``def`` or ``lambda`` of ``fn`` from its source, or None without one."""
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    source = textwrap.dedent("".join(lines))
    if getattr(fn, "__name__", "") != "<lambda>":
        with contextlib.suppress(SyntaxError):
            return next((node for node in ast.walk(ast.parse(source))
                         if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        return None
    line = fn.__code__.co_firstlineno - first  # the lambda's line within ``source``
    text = "\n".join(source.splitlines()[line:])
    text = text[text.find("lambda"):][:500]  # from the lambda on: maybe part of a statement
    for end in range(len(text), 0, -1):
        with contextlib.suppress(SyntaxError):
            return next(node for node in ast.walk(ast.parse(text[:end], mode="eval"))
                        if isinstance(node, ast.Lambda))
    return None


def _is_stub(fn: Callable) -> bool:
    """Is ``fn`` an untouched stub, its body only ``pass``, ``return None`` or ``raise
    NotImplementedError``? A function with real code that returns None forgot its ``return``.
    Without its source (a built-in, a partial), it counts as written."""
    node = _definition(fn)
    if isinstance(node, ast.Lambda):
        return _is_placeholder(node.body)
    return node is not None and all(map(_is_stub_statement, node.body))


def _clone(obj: Any) -> Any:
    if torch.is_tensor(obj):
        return obj.clone()
    if isinstance(obj, (tuple, list)):
        return type(obj)(_clone(item) for item in obj)
    if isinstance(obj, dict):
        return {key: _clone(value) for key, value in obj.items()}
    return obj


def _is_blank(result: Any) -> bool:
    """A stub's answer: None, or a tuple of Nones such as ``(None, None)``."""
    if isinstance(result, (tuple, list)):
        return len(result) > 0 and all(item is None for item in result)
    return result is None


def _describe(value: Any) -> str:
    if value is None:
        return "None (is a `return` missing?)"
    if torch.is_tensor(value):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of length {len(value)}"
    return f"a {type(value).__name__}"


def _no_addresses(text: str) -> str:
    return re.sub(r"0x[0-9a-fA-F]+", "0x...", text)


def _fmt(value: float | bool) -> str:
    return str(value) if isinstance(value, bool) else f"{value:.4g}"


@dataclass(frozen=True)
class _Problem:
    """What differs first, in one phrase, and what to try when no known pitfall matches."""

    message: str
    advice: str = "compare your code with the equation step by step"


def _difference(exercise: Exercise, expected: Any, given: Any) -> _Problem | None:
    """None when ``given`` matches ``expected``, else the first thing that differs."""
    if isinstance(given, _Raised):
        if isinstance(given.error, SystemExit):
            return _Problem(f"your function raised {given.describe()}",
                            "exit() and sys.exit() end the program: return the result instead")
        return _Problem(f"your function raised {given.describe()}",
                        "run it on a small input to see the whole error")
    if given is None:
        return _Problem("your function returned None — did you forget `return`?",
                        "end every path through your function with return <the result>")
    if _is_blank(given):
        return _Problem(f"your function returned only None values ({_describe(given)}) — is "
                        "a value never computed?", "return the computed values")
    names = exercise.outputs
    if len(names) == 1:
        return _tensor_difference(expected, given, "", exercise)
    if not isinstance(given, (tuple, list)) or len(given) != len(names):
        return _Problem(f"expected a tuple ({', '.join(names)}), got {_describe(given)}",
                        f"end with return {', '.join(names)}")
    for label, exp, got in zip(names, expected, given, strict=True):
        problem = _tensor_difference(exp, got, f" for {label}", exercise)
        if problem is not None:
            return problem
    return None


def _tensor_difference(expected: torch.Tensor, got: Any, where: str,
                       exercise: Exercise) -> _Problem | None:
    if not torch.is_tensor(got):
        return _Problem(f"expected a torch.Tensor{where}, got {_describe(got)}",
                        "return a tensor, built with torch operations")
    got = got.detach().cpu()
    if got.shape != expected.shape:
        return _Problem(f"expected shape {tuple(expected.shape)}{where}, got {tuple(got.shape)}",
                        "print the shape after each step and compare it with the expected one")
    if got.dtype != expected.dtype:
        return _Problem(f"expected dtype {expected.dtype}{where}, got {got.dtype}",
                        f"return a {expected.dtype} tensor, for example with .to({expected.dtype})")
    if expected.dtype == torch.bool:
        wrong = got != expected
    else:
        wrong = ~torch.isclose(got, expected, atol=exercise.atol, rtol=exercise.rtol)
    if not wrong.any():
        return None
    index = tuple(int(i) for i in wrong.nonzero()[0])
    exp_value, got_value = expected[index].item(), got[index].item()
    if isinstance(got_value, float) and math.isnan(got_value):
        return _Problem(f"got NaN{where} at index {index}, expected {_fmt(exp_value)}",
                        "look for 0/0: a softmax over a row of -inf, or a division by a zero "
                        "variance")
    message = (f"wrong value{where} at index {index}: expected {_fmt(exp_value)}, "
               f"got {_fmt(got_value)}")
    if expected.dtype != torch.bool:
        diff = (got.double() - expected.double()).abs()
        finite = diff[torch.isfinite(diff)]
        if finite.numel():
            message += f" (largest difference {_fmt(finite.max().item())})"
    return _Problem(message)


def _same(a: Any, b: Any, exercise: Exercise, same_message: bool = True) -> bool:
    """Do two outcomes agree? The same exception (type, and message if ``same_message``), or
    the same shapes and close values (dtype aside, NaN equal to NaN)."""
    if isinstance(a, _Raised) or isinstance(b, _Raised):
        return (isinstance(a, _Raised) and isinstance(b, _Raised)
                and type(a.error) is type(b.error)
                and (not same_message or str(a.error) == str(b.error)))
    sequence = (tuple, list)
    if isinstance(a, sequence) or isinstance(b, sequence):
        return (isinstance(a, sequence) and isinstance(b, sequence) and len(a) == len(b)
                and all(_same(x, y, exercise) for x, y in zip(a, b, strict=True)))
    if not (torch.is_tensor(a) and torch.is_tensor(b)) or a.shape != b.shape:
        return False
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    return torch.allclose(a, b, atol=exercise.atol, rtol=exercise.rtol, equal_nan=True)


def _diagnose(exercise: Exercise, cases: list, given: list, first_bad: int) -> Pitfall | None:
    """Which known pitfall explains the learner's outputs?

    First choice: a variant that agrees with the learner on every case. There an exception only
    needs the same type (``x + pe[:, :L]`` and ``pe[:, :L] + x`` word their errors differently),
    and at least one case must return a value. Second choice: a variant that agrees on the first
    failing case (an exception must then match word for word). Else None.
    """
    outcomes = [[_call(p.variant, case) for case in cases] for p in exercise.pitfalls]
    some_value = not all(isinstance(g, _Raised) for g in given)
    for pitfall, theirs in zip(exercise.pitfalls, outcomes, strict=True):
        if some_value and all(_same(t, g, exercise, same_message=False)
                              for t, g in zip(theirs, given, strict=True)):
            return pitfall
    for pitfall, theirs in zip(exercise.pitfalls, outcomes, strict=True):
        if _same(theirs[first_bad], given[first_bad], exercise):
            return pitfall
    return None


def _where(fn: Callable) -> str:
    """``helpers/attention.py``, plus the qualified name for a method."""
    path = inspect.getmodule(fn).__name__.replace(".", "/") + ".py"
    return f"{path} ({fn.__qualname__})" if "." in fn.__qualname__ else path
