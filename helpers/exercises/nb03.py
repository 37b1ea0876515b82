"""Notebook 03's exercises: ``split_heads`` and ``merge_heads``, with the head bugs H1
and H2 as buggy variants.
"""

from ..attention import merge_heads, split_heads
from .engine import Case, Exercise, Pitfall, randn

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
}
