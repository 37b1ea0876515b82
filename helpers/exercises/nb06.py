"""Notebook 06's exercises: ``causal_mask`` and ``padding_mask`` (the mask bugs M1-M4, M6), each
slip stated as a small edit of the reference in helpers/masks.py."""

import torch

from ..masks import causal_mask, padding_mask
from .cases import exercise
from .engine import Case

_T, _AXES, _REAL = ".tril()", "[:, None, None, :]", "tokens != pad_id"

EXERCISES = {
    "causal_mask": exercise(
        causal_mask, lambda g: [Case(f"size {n}", (n,)) for n in (5, 1, 2, 8)], "output",
        ("M1", "triu instead of tril", (_T, ".triu()"), None),
        ("M1", "True = blocked (triu, diagonal=1)", (_T, ".triu(diagonal=1)"),
         "position t may see positions 0..t; in this course True means may attend "
         "(triu(diagonal=1) is nn.Transformer's True = blocked mask)."),
        ("M2", "diagonal excluded", (_T, ".tril(diagonal=-1)"), None),
        (None, "not a bool tensor", ("dtype=torch.bool, ", ""),
         "return a bool tensor (dtype=torch.bool), True = may attend."),
        (None, "four axes", (_T, ".tril()[None, None]"),
         "causal_mask returns the (size, size) table; the two leading axes go on where it enters "
         "a module: causal_mask(L)[None, None]."),
        ("M1", "every key allowed", (_T, ""),
         "position t may see positions 0..t only: block the keys after t (tril).")),
    "padding_mask": exercise(
        padding_mask, lambda g: [
            Case("pad_id=0", (torch.tensor([[5, 3, 8, 0, 0], [2, 7, 1, 4, 6]]), 0)),
            Case("pad_id=1", (torch.tensor([[4, 9, 1, 1], [7, 2, 5, 1], [3, 1, 1, 1]]), 1)),
            Case("length 1", (torch.tensor([[7]]), 0)),
            Case("pad_id=3, real ids 0-2 and 4-9", (torch.tensor([[0, 4, 2, 3], [1, 9, 3, 3]]), 3)),
        ], "output",
        ("M3", "padding on the query axis", (_AXES, "[:, None, :, None]"),
         "hide the padded keys: shape (B, 1, 1, L)."),
        ("M3", "no singleton axes", (_AXES, ""), None),
        ("M4", "padding polarity", (_REAL, "tokens == pad_id"), None),
        ("M3", "three axes", (_AXES, "[:, None, :]"),
         "a module needs four axes, (B, 1, 1, L): (B, 1, L) lines its batch up with the heads. "
         "Add two singleton axes: [:, None, None, :]."),
        ("M3", "axes in front", (_AXES, "[None, None]"),
         "the batch stays first: (B, 1, 1, L), i.e. [:, None, None, :], not (1, 1, B, L)."),
        (None, "expanded over the queries", (_AXES, _AXES + ".expand(-1, 1, tokens.shape[1], -1)"),
         "keep the query axis of size 1, (B, 1, 1, L): broadcasting stretches it over the "
         "queries and the heads."),
        (None, "not a bool tensor", (_AXES, _AXES + ".float()"),
         "return a bool tensor: tokens != pad_id is already bool, no .float()."),
        ("M6", "tokens > pad_id", (_REAL, "tokens > pad_id"), None),
        ("M6", "pad_id ignored", ("!= pad_id", "!= 0"),
         "use the pad_id argument, not 0: one case pads with 1, another with 3.")),
}
