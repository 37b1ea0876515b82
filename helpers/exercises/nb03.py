"""Notebook 03's exercises: ``split_heads`` and ``merge_heads``, with the head bugs H1
and H2 as buggy variants; ``multi_head_attention``, the learner's ``forward`` for the
notebook's ``__init__``, checked with the reference's weights (A1, A3, A4, A6, H1, H2, H3 and
other likely slips).
"""

import math

import torch

from ..attention import (
    MultiHeadAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
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


def _split_float_d_k(x, num_heads):
    """``d_k = d_model / num_heads`` is a float, and view refuses a float size."""
    B, L, d_model = x.shape
    return x.view(B, L, num_heads, d_model / num_heads).transpose(1, 2)


def _merge_d_k_before_h(x):
    """``permute(0, 2, 3, 1)``: (B, L, d_k, h), so head i's features come back strided."""
    B, h, L, d_k = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, L, h * d_k)


def _merge_transpose_2_3(x):
    """``transpose(2, 3)``: L and d_k swapped instead of h and L."""
    B, h, L, d_k = x.shape
    return x.transpose(2, 3).reshape(B, L, h * d_k)


def _merge_summed(x):
    """The heads summed instead of put side by side."""
    return x.sum(dim=1)


def _merge_averaged(x):
    """The heads averaged instead of put side by side."""
    return x.mean(dim=1)


# multi_head_attention: the reference's forward with one thing wrong. ``_attend`` is the
# notebook's recipe (project, split, attend, merge, project out) with knobs for each bug.

def _attend(self, query, key, value, mask, scale=lambda m: math.sqrt(m.d_k), softmax_dim=-1,
            invert=False, split=split_heads, merge=merge_heads, project_out=True,
            inputs=lambda query, key, value: (query, key, value),
            projections=lambda m: (m.w_q, m.w_k, m.w_v), use_mask=True):
    q, k, v = (split(w(x), self.num_heads) for w, x in
               zip(projections(self), inputs(query, key, value), strict=True))  # (B, h, L, d_k)
    scores = q @ k.transpose(-2, -1) / scale(self)
    mask = mask if use_mask else None
    if mask is not None:
        mask = ~mask if invert else mask
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=softmax_dim)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    out = merge(weights @ v)  # (B, Lq, d_model)
    return self.w_o(out) if project_out else out


def _mha_variant(**bug):
    return type("BuggyMultiHeadAttention", (MultiHeadAttention,), {
        "forward": lambda self, query, key, value, mask=None: _attend(
            self, query, key, value, mask, **bug)})


def _mha_forward(forward):
    return type("BuggyMultiHeadAttention", (MultiHeadAttention,), {"forward": forward})


def _one_big_head(self, query, key, value, mask=None):
    """No split: attention on (B, L, d_model), one head of size d_model."""
    q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
    if mask is not None:
        mask = mask[:, 0]  # (B, 1, Lq or 1, Lk) -> (B, Lq or 1, Lk) for 3-D scores
    return self.w_o(scaled_dot_product_attention(q, k, v, mask)[0])


def _w_o_before_merge(self, query, key, value, mask=None):
    """w_o applied to (B, h, Lq, d_k) before the merge: a shape error."""
    q, k, v = (split_heads(w(x), self.num_heads) for w, x in
               ((self.w_q, query), (self.w_k, key), (self.w_v, value)))
    return merge_heads(self.w_o(scaled_dot_product_attention(q, k, v, mask)[0]))


def _mask_unsqueezed(self, query, key, value, mask=None):
    """``mask.unsqueeze(1)`` on a mask that already has its four axes: five axes."""
    return MultiHeadAttention.forward(self, query, key, value,
                                      None if mask is None else mask.unsqueeze(1))


def _returns_weights_too(self, query, key, value, mask=None):
    """``return output, weights`` where forward returns the output only."""
    out = MultiHeadAttention.forward(self, query, key, value, mask)
    return out, self.attention_weights


_NO_SCALE = _mha_variant(scale=lambda m: 1.0)
_SQRT_D_MODEL = _mha_variant(scale=lambda m: math.sqrt(m.d_model))
_SCALED_TWICE = _mha_variant(scale=lambda m: m.d_k)  # by hand, then inside attention again
_NO_OUTPUT_PROJECTION = _mha_variant(project_out=False)
_WRONG_SPLIT = _mha_variant(split=_split_strided)  # H1: head i gets features i, i + h, ...
_WRONG_MERGE = _mha_variant(merge=_merge_without_transpose)  # H2
_SOFTMAX_OVER_QUERIES = _mha_variant(softmax_dim=-2)
_INVERTED_MASK = _mha_variant(invert=True)
_MASK_IGNORED = _mha_variant(use_mask=False)
_ALL_FROM_QUERY = _mha_variant(inputs=lambda query, key, value: (query, query, query))
_KEY_VALUE_SWAPPED = _mha_variant(inputs=lambda query, key, value: (query, value, key))
_ONE_PROJECTION = _mha_variant(projections=lambda m: (m.w_q, m.w_q, m.w_q))
_K_V_PROJECTIONS_SWAPPED = _mha_variant(projections=lambda m: (m.w_q, m.w_v, m.w_k))
_ONE_BIG_HEAD = _mha_forward(_one_big_head)
_W_O_BEFORE_MERGE = _mha_forward(_w_o_before_merge)
_MASK_UNSQUEEZED = _mha_forward(_mask_unsqueezed)
_RETURNS_WEIGHTS = _mha_forward(_returns_weights_too)
_VIEW_AFTER_TRANSPOSE = _mha_variant(merge=_merge_view_after_transpose)


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
        case("one query (Lq=1), 5 keys, d_model=24, 4 heads", 24, 4, 1, 5),
    ]


_HINT_H1 = ("did you split as view(B, L, h, d_k) and then transpose(1, 2)? Each head needs a "
            "contiguous block of d_k features.")
_HINT_VIEW = ("after transpose the memory is no longer in order, so view fails: use .reshape(...) "
              "or .contiguous().view(...).")
_HINT_PROJECTIONS = ("each input has its own projection: q = w_q(query), k = w_k(key), "
                     "v = w_v(value).")

def _split_wrong_transpose(x, num_heads):
    """view(B, L, h, d_k), then transpose(1, 3) instead of (1, 2): (B, d_k, h, L)."""
    B, L, d_model = x.shape
    return x.view(B, L, num_heads, d_model // num_heads).transpose(1, 3)


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
            Pitfall(None, "transpose(1, 3)", _split_wrong_transpose,
                    "after view(B, L, h, d_k), swap the L and h axes, axes 1 and 2: "
                    "transpose(1, 2). transpose(1, 3) swaps L with d_k."),
            Pitfall(None, "d_k a float", _split_float_d_k,
                    "d_model / num_heads is a float (6.0), and view needs whole numbers: "
                    "d_k = d_model // num_heads."),
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
            Pitfall(None, "view after transpose", _merge_view_after_transpose, _HINT_VIEW),
            Pitfall(None, "d_k before h", _merge_d_k_before_h,
                    "put the axes in the order (B, L, h, d_k) before reshaping, with "
                    "transpose(1, 2): d_k before h interleaves the heads' features."),
            Pitfall(None, "transpose(2, 3)", _merge_transpose_2_3,
                    "swap the head axis and the token axis, transpose(1, 2), to get "
                    "(B, L, h, d_k); transpose(2, 3) swaps L and d_k."),
            *(Pitfall(None, name, fn, "the heads go side by side (Concat), not summed or "
                      "averaged: the result has h * d_k features per token.")
              for name, fn in (("heads summed", _merge_summed),
                               ("heads averaged", _merge_averaged))),
        ),
    ),
    "multi_head_attention": Exercise(
        reference=MultiHeadAttention,
        make_cases=_mha_cases,
        sources=(MultiHeadAttention.forward,),
        pitfalls=(
            Pitfall("A1", "no scaling", _NO_SCALE,
                    "divide the scores by the square root of the key dimension of one head, "
                    "sqrt(d_k): without it, large dot products push the softmax towards one-hot "
                    "weights."),
            Pitfall("A1", "sqrt(d_model)", _SQRT_D_MODEL,
                    "scale by the square root of the key dimension of one head, "
                    "sqrt(d_k) = sqrt(d_model / h), not sqrt(d_model)."),
            Pitfall("A6", "scaled twice", _SCALED_TWICE,
                    "scaled_dot_product_attention already divides by sqrt(d_k): do not scale the "
                    "scores (or the queries) again before calling it."),
            Pitfall("H3", "no output projection", _NO_OUTPUT_PROJECTION,
                    "after merging the heads, mix them with the output projection w_o: "
                    "MultiHead = Concat(head_1, ..., head_h) W_O."),
            Pitfall("H1", "view(B, L, d_k, h)", _WRONG_SPLIT, _HINT_H1),
            Pitfall("H2", "merge without transposing back", _WRONG_MERGE,
                    "transpose heads back next to d_k before reshaping: "
                    "(B, h, L, d_k) -> (B, L, h, d_k) -> (B, L, h * d_k)."),
            Pitfall("A4", "softmax over the queries", _SOFTMAX_OVER_QUERIES,
                    "take the softmax over the last axis (the keys): each query's weights "
                    "must sum to 1."),
            Pitfall("A3", "inverted mask", _INVERTED_MASK,
                    "True means may attend: fill the scores where the mask is False."),
            Pitfall(None, "mask ignored", _MASK_IGNORED,
                    "pass the mask on to the attention: the checker's padding and look-ahead "
                    "masks must hide keys."),
            Pitfall(None, "keys and values from query", _ALL_FROM_QUERY,
                    "take the keys from key and the values from value: in cross-attention they "
                    "are another sequence than query."),
            Pitfall(None, "key and value swapped", _KEY_VALUE_SWAPPED,
                    "keys come from key (k = w_k(key)) and values from value (v = w_v(value)), "
                    "not the other way round."),
            Pitfall(None, "w_q for everything", _ONE_PROJECTION, _HINT_PROJECTIONS),
            Pitfall(None, "w_k and w_v swapped", _K_V_PROJECTIONS_SWAPPED, _HINT_PROJECTIONS),
            Pitfall(None, "one big head", _ONE_BIG_HEAD,
                    "split q, k and v into heads, (B, h, L, d_k), before the attention: on "
                    "(B, L, d_model) it runs as one head of size d_model."),
            Pitfall(None, "w_o before the merge", _W_O_BEFORE_MERGE,
                    "merge the heads first, (B, h, Lq, d_k) -> (B, Lq, d_model), then apply w_o."),
            Pitfall(None, "mask unsqueezed", _MASK_UNSQUEEZED,
                    "the mask already has its four axes, (B or 1, 1, Lq or 1, Lk): pass it on "
                    "as it is."),
            Pitfall(None, "output and weights returned", _RETURNS_WEIGHTS,
                    "forward returns the output (B, Lq, d_model) only, not (output, weights)."),
            Pitfall(None, "view after transpose", _VIEW_AFTER_TRANSPOSE, _HINT_VIEW),
        ),
    ),
}
