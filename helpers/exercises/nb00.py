"""Notebook 00's warm-up exercise, there to show how ``check`` works: ``batch_first``, a tensor
``(L, B, d_model)`` (the layout of ``nn.MultiheadAttention``'s default) turned into the course's
``(B, L, d_model)``. Its slips are the usual ways to swap two axes wrongly."""

import torch

from .cases import randn, swaps
from .engine import Case, Exercise


def batch_first(x: torch.Tensor) -> torch.Tensor:
    """``x`` of shape ``(L, B, d_model)`` -> the same numbers as ``(B, L, d_model)``."""
    return x.transpose(0, 1)  # swap the first two axes


SLIPS = swaps(batch_first, "x.transpose(0, 1)", (
    (None, "reshape instead of transpose", "x.reshape(x.shape[1], x.shape[0], x.shape[2])",
     "reshape gives the right shape but keeps the numbers in memory order, so it mixes positions "
     "and sentences: swap the axes with x.transpose(0, 1)."),
    (None, "every axis reversed", "x.permute(2, 1, 0)", "x.T (or permute(2, 1, 0)) reverses "
     "every axis: swap only the first two, x.transpose(0, 1)."),
    (None, "the last two axes swapped", "x.transpose(1, 2)", "the first axis is L and the second "
     "B: swap axes 0 and 1, not 1 and 2."),
    (None, "nothing changed", "x", "the input is (L, B, d_model): positions first. Swap the first "
     "two axes.")))

EXERCISES = {
    "batch_first": Exercise(
        reference=batch_first, sources=(batch_first,), pitfalls=SLIPS,
        make_cases=lambda g: [
            Case("L=4, B=2, d_model=3", (randn(g, 4, 2, 3),)),
            Case("L=3, B=3, d_model=5 (as many positions as sentences)", (randn(g, 3, 3, 5),)),
            Case("L=1, B=2, d_model=4", (randn(g, 1, 2, 4),)),
            Case("L=5, B=1, d_model=2", (randn(g, 5, 1, 2),))]),
}
