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
             (torch.tensor([[[1.0, 2.0, 80.0], [0.5, 90.0, 0.0]]]),
              torch.tensor([[[True, True, False], [True, False, True]]]))),
    ]


# ----------------------------------------------------------------------------------------------
# Hints and the registry
# ----------------------------------------------------------------------------------------------

_HINT_A1 = ("divide by the square root of the key dimension of one head: "
            "scores = q @ k^T / sqrt(d_k), with d_k = q.shape[-1].")
_HINT_A2 = ("mask the scores before softmax (masked_fill on the scores), so each row still "
            "sums to 1.")
HINT_A3 = ("in this course True means may attend (the F.scaled_dot_product_attention "
            "convention): fill the scores where the mask is False.")
_HINT_A4 = "each query's weights over the keys must sum to 1: softmax over the last axis (dim=-1)."
_HINT_A5_NAN = ("what happens when a whole row is masked? softmax of a row of -inf is 0/0 = NaN; "
                "fill with torch.finfo(dtype).min and set such rows to 0.")
_HINT_A5_UNIFORM = ("what happens when a whole row is masked? Every key gets the same score, so "
                    "softmax spreads 1/Lk over keys it must not see: set such rows to 0.")

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
            Pitfall("A3", "inverted mask", _attention_inverted_mask, HINT_A3),
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
        ),
    ),
}
