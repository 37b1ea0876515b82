"""Notebook 03's exercises: ``split_heads`` and ``merge_heads``, with the head bugs H1
and H2 as buggy variants; ``multi_head_attention``, the learner's ``forward`` for the
notebook's ``__init__``, checked with the reference's weights (A1, A3, A4, A6, H1, H3).
"""

import math

import torch

from ..attention import MultiHeadAttention, merge_heads, split_heads
from .engine import Case, Exercise, ModuleCase, Pitfall, randn

# ----------------------------------------------------------------------------------------------
# Buggy variants, each with the learner's signature
# ----------------------------------------------------------------------------------------------

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


# multi_head_attention: the reference's forward with one thing wrong. ``_attend`` is the
# notebook's recipe (project, split, attend, merge, project out) with knobs for each bug.

def _attend(self, query, key, value, mask, scale=lambda m: math.sqrt(m.d_k), softmax_dim=-1,
            invert=False, split=split_heads, project_out=True):
    q, k, v = (split(w(x), self.num_heads) for w, x in
               ((self.w_q, query), (self.w_k, key), (self.w_v, value)))  # (B, h, L, d_k)
    scores = q @ k.transpose(-2, -1) / scale(self)
    if mask is not None:
        mask = ~mask if invert else mask
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=softmax_dim)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    out = merge_heads(weights @ v)  # (B, Lq, d_model)
    return self.w_o(out) if project_out else out


def _mha_variant(**bug):
    return type("BuggyMultiHeadAttention", (MultiHeadAttention,), {
        "forward": lambda self, query, key, value, mask=None: _attend(
            self, query, key, value, mask, **bug)})


_NO_SCALE = _mha_variant(scale=lambda m: 1.0)
_SQRT_D_MODEL = _mha_variant(scale=lambda m: math.sqrt(m.d_model))
_NO_OUTPUT_PROJECTION = _mha_variant(project_out=False)
_WRONG_SPLIT = _mha_variant(split=_split_strided)  # H1: head i gets features i, i + h, ...
_SOFTMAX_OVER_QUERIES = _mha_variant(softmax_dim=-2)
_INVERTED_MASK = _mha_variant(invert=True)


# ----------------------------------------------------------------------------------------------
# Test cases (seeded; edge cases chosen so that each buggy variant shows)
# ----------------------------------------------------------------------------------------------

def _split_cases(g):
    return [
        Case("d_model=24, h=4 (d_k=6 != h)", (randn(g, 2, 5, 24), 4)),
        Case("d_model=16, h=4 (d_k = h)", (randn(g, 2, 3, 16), 4)),
        Case("length 1", (randn(g, 1, 1, 8), 2)),
        Case("one head", (randn(g, 2, 4, 6), 1)),
    ]


def _merge_cases(g):
    return [
        Case("h=4, d_k=6", (randn(g, 2, 4, 5, 6),)),
        Case("h = d_k = 4", (randn(g, 2, 4, 3, 4),)),
        Case("length 1", (randn(g, 1, 2, 1, 3),)),
        Case("one head", (randn(g, 2, 1, 4, 8),)),
    ]


def _mha_cases(g):
    def case(label, d_model, heads, lq, lk, mask=None, batch=2, self_attention=False):
        query = randn(g, batch, lq, d_model)
        key = query if self_attention else randn(g, batch, lk, d_model)
        value = query if self_attention else randn(g, batch, lk, d_model)
        return ModuleCase(label, (query, key, value, mask), weights_of=MultiHeadAttention,
                          init={"d_model": d_model, "num_heads": heads})

    padding = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None, None, :]
    return [
        case("self-attention, d_model=24, 4 heads (d_k=6), no mask", 24, 4, 5, 5,
             self_attention=True),
        case("cross-attention, 3 queries, 6 keys, padding mask (B, 1, 1, 6)", 24, 4, 3, 6,
             padding),
        case("look-ahead mask (1, 1, 4, 4), d_model=16, 2 heads", 16, 2, 4, 4,
             torch.ones(4, 4, dtype=torch.bool).tril()[None, None], self_attention=True),
        case("batch of 1, d_model=8, one head", 8, 1, 2, 3, batch=1),
    ]


_HINT_H1 = ("did you split as view(B, L, h, d_k) and then transpose(1, 2)? Each head needs a "
            "contiguous block of d_k features.")

EXERCISES: dict[str, Exercise] = {
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
    "multi_head_attention": Exercise(
        reference=MultiHeadAttention,
        make_cases=_mha_cases,
        sources=(MultiHeadAttention.forward,),
        pitfalls=(
            Pitfall("A6", "no scaling", _NO_SCALE,
                    "divide the scores by sqrt(d_k): without it, large dot products push the "
                    "softmax towards one-hot weights."),
            Pitfall("A1", "sqrt(d_model)", _SQRT_D_MODEL,
                    "scale by the square root of the key dimension of one head, "
                    "sqrt(d_k) = sqrt(d_model / h), not sqrt(d_model)."),
            Pitfall("H3", "no output projection", _NO_OUTPUT_PROJECTION,
                    "after merging the heads, mix them with the output projection w_o: "
                    "MultiHead = Concat(head_1, ..., head_h) W_O."),
            Pitfall("H1", "view(B, L, d_k, h)", _WRONG_SPLIT, _HINT_H1),
            Pitfall("A4", "softmax over the queries", _SOFTMAX_OVER_QUERIES,
                    "take the softmax over the last axis (the keys): each query's weights "
                    "must sum to 1."),
            Pitfall("A3", "inverted mask", _INVERTED_MASK,
                    "True means may attend: fill the scores where the mask is False."),
        ),
    ),
}
