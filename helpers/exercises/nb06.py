"""Notebook 06's exercises: ``causal_mask`` and ``padding_mask``, with the mask bugs
M1-M4 as buggy variants.
"""

import torch

from ..masks import causal_mask, padding_mask
from .engine import Case, Exercise, Pitfall

# ----------------------------------------------------------------------------------------------
# Buggy variants, each with the learner's signature
# ----------------------------------------------------------------------------------------------

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


def _causal_four_axes(size):
    """The right pattern with the module boundary's two leading axes: (1, 1, size, size)."""
    return torch.ones(size, size, dtype=torch.bool).tril()[None, None]


def _causal_all_true(size):
    """Every key allowed: no look-ahead at all."""
    return torch.ones(size, size, dtype=torch.bool)


def _padding_on_queries(tokens, pad_id):
    """M3: (B, 1, L, 1): hides padded queries (rows) but not padded keys (columns)."""
    return (tokens != pad_id)[:, None, :, None]


def _padding_without_axes(tokens, pad_id):
    """M3: (B, L) without the singleton axes: does not broadcast to (B, h, Lq, Lk) correctly."""
    return tokens != pad_id


def _padding_three_axes(tokens, pad_id):
    """M3: (B, 1, L): one singleton axis, where a module needs four axes."""
    return (tokens != pad_id)[:, None, :]


def _padding_axes_in_front(tokens, pad_id):
    """M3: (1, 1, B, L): the two singleton axes put in front instead of after the batch."""
    return (tokens != pad_id)[None, None]


def _padding_expanded(tokens, pad_id):
    """(B, 1, L, L): the key row copied to every query, where (B, 1, 1, L) broadcasts."""
    L = tokens.shape[1]
    return (tokens != pad_id)[:, None, None, :].expand(-1, 1, L, L)


def _padding_float(tokens, pad_id):
    """The right mask as a float tensor of 1s and 0s."""
    return (tokens != pad_id)[:, None, None, :].float()


def _padding_greater(tokens, pad_id):
    """M6: tokens > pad_id: real tokens with a smaller id than the pad are hidden too."""
    return (tokens > pad_id)[:, None, None, :]


def _padding_zero(tokens, pad_id):
    """M6: pad_id ignored, 0 hard-coded as the padding id."""
    return (tokens != 0)[:, None, None, :]


def _padding_inverted(tokens, pad_id):
    """M4: ``tokens == pad_id`` marks the padding as True."""
    return (tokens == pad_id)[:, None, None, :]


# ----------------------------------------------------------------------------------------------
# Test cases
# ----------------------------------------------------------------------------------------------

def _causal_cases(g):
    return [Case(f"size {n}", (n,)) for n in (5, 1, 2, 8)]


def _padding_cases(g):
    return [
        Case("pad_id=0", (torch.tensor([[5, 3, 8, 0, 0], [2, 7, 1, 4, 6]]), 0)),
        Case("pad_id=1", (torch.tensor([[4, 9, 1, 1], [7, 2, 5, 1], [3, 1, 1, 1]]), 1)),
        Case("length 1", (torch.tensor([[7]]), 0)),
        Case("pad_id=3, real ids 0-2 and 4-9",
             (torch.tensor([[0, 4, 2, 3], [1, 9, 3, 3]]), 3)),
    ]


EXERCISES: dict[str, Exercise] = {
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
            Pitfall(None, "four axes", _causal_four_axes,
                    "causal_mask returns the (size, size) table; the two leading axes go on "
                    "where it enters a module: causal_mask(L)[None, None]."),
            Pitfall("M1", "every key allowed", _causal_all_true,
                    "position t may see positions 0..t only: block the keys after t (tril)."),
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
            Pitfall("M3", "three axes", _padding_three_axes,
                    "a module needs four axes, (B, 1, 1, L): (B, 1, L) lines its batch up with "
                    "the heads. Add two singleton axes: [:, None, None, :]."),
            Pitfall("M3", "axes in front", _padding_axes_in_front,
                    "the batch stays first: (B, 1, 1, L), i.e. [:, None, None, :], not "
                    "(1, 1, B, L)."),
            Pitfall(None, "expanded over the queries", _padding_expanded,
                    "keep the query axis of size 1, (B, 1, 1, L): broadcasting stretches it "
                    "over the queries and the heads."),
            Pitfall(None, "not a bool tensor", _padding_float,
                    "return a bool tensor: tokens != pad_id is already bool, no .float()."),
            Pitfall("M6", "tokens > pad_id", _padding_greater,
                    "compare with !=: a real token may have a smaller id than pad_id "
                    "(tokens != pad_id, not tokens > pad_id)."),
            Pitfall("M6", "pad_id ignored", _padding_zero,
                    "use the pad_id argument, not 0: one case pads with 1, another with 3."),
        ),
    ),
}
