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
# Test cases
# ----------------------------------------------------------------------------------------------

def _causal_cases(g):
    return [Case(f"size {n}", (n,)) for n in (5, 1, 2, 8)]


def _padding_cases(g):
    return [
        Case("pad_id=0", (torch.tensor([[5, 3, 8, 0, 0], [2, 7, 1, 4, 6]]), 0)),
        Case("pad_id=1", (torch.tensor([[4, 9, 1, 1], [7, 2, 5, 1], [3, 1, 1, 1]]), 1)),
        Case("length 1", (torch.tensor([[7]]), 0)),
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
