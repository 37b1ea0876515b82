"""Notebook 01's exercises: ``scaled_dot_product_attention`` and ``masked_softmax``.

The classic attention bugs A1-A5 (helpers/exercises/pitfalls.py) as buggy variants.
"""

import math

import torch

from ..attention import scaled_dot_product_attention
from ..checks import check_scores_mask
from .engine import Case, Exercise, Pitfall, randn

# ----------------------------------------------------------------------------------------------
# The reference that helpers/ has no function for (shown by solution())
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


# ----------------------------------------------------------------------------------------------
# Buggy variants, each with the learner's signature
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


def _softmax_over_axis(dim):
    """A4: the softmax over a fixed axis (``dim=1``, ``dim=2``) instead of the last one: right for
    some numbers of axes only."""

    def softmax(scores, mask):
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        return scores.softmax(dim=dim).masked_fill(~mask, 0.0)

    return softmax


def _softmax_times_mask(scores, mask):
    """The scores times the mask (or filled with 0): a blocked key scores 0, and e^0 = 1 counts."""
    return (scores * mask).softmax(dim=-1).masked_fill(~mask, 0.0)


def _softmax_renormalised(scores, mask):
    """Softmax of every key, blocked weights set to 0, rows divided by their new sums: a blocked key
    that scores far above the others leaves underflowed (or 0/0) weights."""
    weights = scores.softmax(dim=-1) * mask
    return weights / weights.sum(dim=-1, keepdim=True)


def _softmax_boolean_index(scores, mask):
    """``scores[~mask] = ...``: boolean indexing needs a mask of the scores' exact shape."""
    scores = scores.clone()
    scores[~mask] = torch.finfo(scores.dtype).min
    weights = scores.softmax(dim=-1)
    weights[~mask] = 0.0
    return weights


def _softmax_fill_minus_1e9(scores, mask):
    """Fill with -1e9 and zero afterwards: right in float32, an overflow error in float16."""
    return scores.masked_fill(~mask, -1e9).softmax(dim=-1).masked_fill(~mask, 0.0)


def _attention_with(softmax_fn, scale=math.sqrt):
    """Build attention from a (maybe buggy) masked softmax and a (maybe buggy) scale of d_k."""

    def attention(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / scale(q.shape[-1])  # (..., Lq, Lk)
        if mask is None:
            mask = torch.ones(scores.shape, dtype=torch.bool)  # nothing is masked
        weights = softmax_fn(scores, mask)
        return weights @ v, weights

    return attention


def _attention_inverted_mask(q, k, v, mask=None):
    """A3: the mask used with True = blocked."""
    return scaled_dot_product_attention(q, k, v, None if mask is None else ~mask)


def _attention_scaled_by(size):
    """A1: the scores divided by the square root of another size than d_k."""

    def attention(q, k, v, mask=None):
        return _attention_with(masked_softmax, lambda d_k: math.sqrt(size(q, k, v)))(q, k, v, mask)

    return attention


def _attention_times_sqrt(q, k, v, mask=None):
    """A1: the scores multiplied by sqrt(d_k) instead of divided."""
    return _attention_with(masked_softmax, lambda d_k: 1 / math.sqrt(d_k))(q, k, v, mask)


def _attention_weights_scaled(q, k, v, mask=None):
    """The scale applied to the weights after the softmax instead of to the scores."""
    scores = q @ k.transpose(-2, -1)
    weights = masked_softmax(scores, _all(scores) if mask is None else mask)
    weights = weights / math.sqrt(q.shape[-1])
    return weights @ v, weights


def _all(scores):
    return torch.ones(scores.shape, dtype=torch.bool)


def _attention_key_T(q, k, v, mask=None):
    """``key.T``: on a batch, ``.T`` reverses every axis instead of swapping the last two."""
    scores = q @ k.permute(*reversed(range(k.dim()))) / math.sqrt(q.shape[-1])  # k.T
    weights = masked_softmax(scores, _all(scores) if mask is None else mask)
    return weights @ v, weights


def _attention_transpose_1_2(q, k, v, mask=None):
    """``key.transpose(1, 2)``: the last two axes of a 3-D key only; on (B, h, L, d_k) it swaps
    the heads and the keys."""
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    weights = masked_softmax(scores, _all(scores) if mask is None else mask)
    return weights @ v, weights


def _attention_swapped_outputs(q, k, v, mask=None):
    """``return weights, output``: the tuple in the wrong order."""
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    return weights, out


def _attention_mask_ignored(q, k, v, mask=None):
    """The mask argument never used."""
    return scaled_dot_product_attention(q, k, v)


# ----------------------------------------------------------------------------------------------
# Test cases (seeded; edge cases chosen so that each buggy variant shows)
# ----------------------------------------------------------------------------------------------

def _causal(size):
    """The look-ahead mask (True on and below the diagonal), as ``helpers.masks.causal_mask``
    builds it in notebook 06."""
    return torch.ones(size, size, dtype=torch.bool).tril()


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
        Case("no mask", (randn(g, 2, 3, 8), randn(g, 2, 4, 8), randn(g, 2, 4, 5))),
        Case("a random mask", (randn(g, 2, 4, 6), randn(g, 2, 5, 6), randn(g, 2, 5, 6),
                               _random_mask(g, 2, 4, 5))),
        Case("4-D (B, h, L, d_k) inputs with a causal mask",
             (randn(g, 2, 3, 4, 8), randn(g, 2, 3, 4, 8), randn(g, 2, 3, 4, 8),
              _causal(4)[None, None])),
        Case("a fully masked row", (randn(g, 1, 3, 4), randn(g, 1, 4, 4), randn(g, 1, 4, 2),
                                    _mask_with_blocked_row(g, 1, 3, 4, row=1))),
        Case("length 1", (randn(g, 1, 1, 2), randn(g, 1, 1, 2), randn(g, 1, 1, 3),
                          torch.ones(1, 1, 1, dtype=torch.bool))),
        # a blocked key with a huge score: masking after the softmax cannot hide it
        Case("a blocked key scoring far above the others",
             (torch.tensor([[[15.0], [1.0]]]), torch.tensor([[[1.0], [20.0], [-1.0]]]),
              randn(g, 1, 3, 2), torch.tensor([[[True, False, True], [True, False, True]]]))),
    ]


def _masked_softmax_cases(g):
    key_padding = torch.tensor([True, True, True, True, False, True]).view(2, 1, 1, 3)
    return [
        Case("a random mask", (2 * randn(g, 2, 3, 5), _random_mask(g, 2, 3, 5))),
        Case("a causal mask broadcast over (B, h)", (2 * randn(g, 2, 2, 4, 4),
                                                          _causal(4)[None, None])),
        Case("a (B, 1, 1, L) padding mask", (2 * randn(g, 2, 2, 3, 3), key_padding)),
        Case("a fully masked row", (2 * randn(g, 1, 3, 4),
                                    _mask_with_blocked_row(g, 1, 3, 4, row=1))),
        Case("length 1", (randn(g, 1, 1, 1), torch.ones(1, 1, 1, dtype=torch.bool))),
        # a blocked key with a huge score: masking after the softmax cannot hide it
        Case("a blocked key scoring far above the others",
             (torch.tensor([[[1.0, 2.0, 150.0], [0.5, 160.0, 0.0]]]),
              torch.tensor([[[True, True, False], [True, False, True]]]))),
        # float16, where -1e9 does not fit; weights 0, 1/2 and 1 are exact in any dtype
        Case("float16 scores with a fully masked row",
             (torch.tensor([[[1.0, 1.0, 5.0], [2.0, 0.0, 3.0], [0.5, 0.5, 0.5]]],
                           dtype=torch.float16),
              torch.tensor([[[True, True, False], [False, True, False],
                             [False, False, False]]]))),
    ]


# ----------------------------------------------------------------------------------------------
# Hints and the registry
# ----------------------------------------------------------------------------------------------

_HINT_A1 = ("divide by the square root of the key dimension of one head: "
            "scores = q @ k^T / sqrt(d_k), with d_k = q.shape[-1].")
_HINT_A1_SIZE = ("divide by the square root of the key dimension of one head, d_k = "
                 "query.shape[-1] (the size of each query and key vector), not the size of the "
                 "values or the number of keys.")
_HINT_A1_TIMES = ("divide by the square root of the key dimension of one head: / "
                  "math.sqrt(d_k), not * math.sqrt(d_k).")
_HINT_A2 = ("mask the scores before softmax (masked_fill on the scores), so each row still "
            "sums to 1.")
HINT_A3 = ("in this course True means may attend (the F.scaled_dot_product_attention "
            "convention): fill the scores where the mask is False.")
_HINT_A4 = ("each query's weights over the keys must sum to 1: softmax over the last axis "
            "(dim=-1), whatever the number of axes before it.")
_HINT_A5_NAN = ("what happens when a whole row is masked? softmax of a row of -inf is 0/0 = NaN; "
                "fill with torch.finfo(dtype).min and set such rows to 0.")
_HINT_A5_UNIFORM = ("what happens when a whole row is masked? Every key gets the same score, so "
                    "softmax spreads 1/Lk over keys it must not see: set such rows to 0.")
_HINT_TIMES_MASK = ("a blocked score of 0 (scores * mask, or masked_fill with 0) still takes a "
                    "share of the softmax, since e^0 = 1: fill blocked scores with "
                    "torch.finfo(scores.dtype).min before the softmax.")
_HINT_RENORMALISED = ("a softmax over every key, then renormalised, loses the allowed weights "
                      "when a blocked key scores far above them (they underflow to 0): mask the "
                      "scores before the softmax.")
_HINT_BOOLEAN_INDEX = ("scores[~mask] = ... needs a mask of the scores' exact shape, and masks "
                       "here broadcast (size 1 on shared axes): use scores.masked_fill(~mask, "
                       "...), which broadcasts.")
_HINT_MINUS_1E9 = ("-1e9 does not fit in float16 (largest: 65504): fill with "
                   "torch.finfo(scores.dtype).min, the right value for every dtype.")

_ATTENTION_SOFTMAX_PITFALLS = (  # (id, name, masked softmax variant, hint), shared by two exercises
    ("A2", "mask after softmax (zeros)", _softmax_then_zero, _HINT_A2),
    ("A2", "mask after softmax (-inf)", _softmax_then_minus_inf, _HINT_A2),
    ("A4", "softmax over the queries", _softmax_over_queries, _HINT_A4),
    ("A4", "softmax over axis 1", _softmax_over_axis(1), _HINT_A4),
    ("A4", "softmax over axis 2", _softmax_over_axis(2), _HINT_A4),
    ("A5", "NaN for a fully masked row", _softmax_nan_rows, _HINT_A5_NAN),
    ("A5", "uniform weights for a fully masked row", _softmax_uniform_rows, _HINT_A5_UNIFORM),
    (None, "scores multiplied by the mask", _softmax_times_mask, _HINT_TIMES_MASK),
    (None, "softmax, zero, renormalise", _softmax_renormalised, _HINT_RENORMALISED),
    (None, "boolean indexing with a broadcast mask", _softmax_boolean_index, _HINT_BOOLEAN_INDEX),
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
            Pitfall("A1", "multiplied by sqrt(d_k)", _attention_times_sqrt, _HINT_A1_TIMES),
            Pitfall("A1", "scaled by sqrt(d_v)", _attention_scaled_by(lambda q, k, v: v.shape[-1]),
                    _HINT_A1_SIZE),
            Pitfall("A1", "scaled by sqrt(Lk)", _attention_scaled_by(lambda q, k, v: k.shape[-2]),
                    _HINT_A1_SIZE),
            Pitfall(None, "the weights scaled after the softmax", _attention_weights_scaled,
                    "divide the scores by sqrt(d_k) before the softmax; dividing the weights "
                    "afterwards leaves rows that no longer sum to 1."),
            Pitfall("A3", "inverted mask", _attention_inverted_mask, HINT_A3),
            Pitfall(None, "key.T", _attention_key_T,
                    "key.T reverses every axis of a batch: swap only the last two with "
                    "key.transpose(-2, -1), so that any number of leading axes works."),
            Pitfall(None, "key.transpose(1, 2)", _attention_transpose_1_2,
                    "transpose(1, 2) swaps the last two axes of a 3-D key only; with heads, "
                    "(B, h, L, d_k), it swaps h and L: use key.transpose(-2, -1)."),
            Pitfall(None, "(weights, output)", _attention_swapped_outputs,
                    "return the tuple in the order (output, weights)."),
            Pitfall(None, "mask ignored", _attention_mask_ignored,
                    "use the mask: fill the scores where it is False before the softmax "
                    "(masked_softmax from section 3 does it)."),
            *(Pitfall(pid, name, _attention_with(fn), hint)
              for pid, name, fn, hint in _ATTENTION_SOFTMAX_PITFALLS),
        ),
    ),
    "masked_softmax": Exercise(
        reference=masked_softmax,
        make_cases=_masked_softmax_cases,
        sources=(masked_softmax,),
        pitfalls=(
            Pitfall("A3", "inverted mask", _softmax_inverted_mask, HINT_A3),
            *(Pitfall(*entry) for entry in _ATTENTION_SOFTMAX_PITFALLS),
            Pitfall(None, "-1e9 in float16", _softmax_fill_minus_1e9, _HINT_MINUS_1E9),
        ),
    ),
}
