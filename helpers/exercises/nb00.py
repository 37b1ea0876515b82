"""Notebook 00's warm-up exercise, there to show how ``check`` works: ``batch_first``, a tensor
``(L, B, d_model)`` (the layout of ``nn.MultiheadAttention``'s default) turned into the course's
``(B, L, d_model)``. Its buggy variants are the usual ways to swap two axes wrongly.
"""

import torch

from .engine import Case, Exercise, Pitfall, randn


def batch_first(x: torch.Tensor) -> torch.Tensor:
    """``x`` of shape ``(L, B, d_model)`` -> the same numbers as ``(B, L, d_model)``."""
    return x.transpose(0, 1)  # swap the first two axes


def _reshaped(x):
    """The right shape by reshape: the numbers regrouped in memory order, not moved."""
    L, B, d = x.shape
    return x.reshape(B, L, d)


def _every_axis_reversed(x):
    """``x.T`` (or ``permute(2, 1, 0)``): (d_model, B, L)."""
    return x.permute(2, 1, 0)


def _last_two_swapped(x):
    return x.transpose(1, 2)


def _unchanged(x):
    return x


def _cases(g):
    return [Case("L=4, B=2, d_model=3", (randn(g, 4, 2, 3),)),
            Case("L=3, B=3, d_model=5 (as many positions as sentences)", (randn(g, 3, 3, 5),)),
            Case("L=1, B=2, d_model=4", (randn(g, 1, 2, 4),)),
            Case("L=5, B=1, d_model=2", (randn(g, 5, 1, 2),))]


EXERCISES = {
    "batch_first": Exercise(
        reference=batch_first,
        make_cases=_cases,
        sources=(batch_first,),
        pitfalls=(
            Pitfall(None, "reshape instead of transpose", _reshaped,
                    "reshape gives the right shape but keeps the numbers in memory order, so "
                    "it mixes positions and sentences: swap the axes with x.transpose(0, 1)."),
            Pitfall(None, "every axis reversed", _every_axis_reversed,
                    "x.T (or permute(2, 1, 0)) reverses every axis: swap only the first two, "
                    "x.transpose(0, 1)."),
            Pitfall(None, "the last two axes swapped", _last_two_swapped,
                    "the first axis is L and the second B: swap axes 0 and 1, not 1 and 2."),
            Pitfall(None, "nothing changed", _unchanged,
                    "the input is (L, B, d_model): positions first. Swap the first two axes."),
        ),
    ),
}
