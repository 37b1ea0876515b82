"""Notebook 02's exercises: sinusoidal_encoding, add_positional_encoding and pe_rotation."""

import math

import torch

from ..positional import sinusoidal_encoding
from .cases import randn, slips, swaps
from .engine import Case, Exercise


def add_positional_encoding(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    """``x (B, L, d_model)`` plus the first L rows of the ``(max_len, d_model)`` table ``pe``."""
    L = x.shape[1]
    return x + pe[:L]  # slice positions (rows), not features; (L, d_model) broadcasts over B


def pe_rotation(k: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The ``(d_model, d_model)`` matrix M with ``PE[p + k] == M @ PE[p]`` for every position p.

    Columns ``(2i, 2i+1)`` of PE hold ``(sin(p w_i), cos(p w_i))``, ``w_i = base**(-2i/d_model)``.
    The angle-addition formulas give, for each pair, a 2x2 rotation that does not depend on p:
    ``sin(a + b) = sin a cos b + cos a sin b`` and ``cos(a + b) = cos a cos b - sin a sin b``.
    """
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        angle = k / base ** (2 * i / d_model)  # k * w_i
        c, s = math.cos(angle), math.sin(angle)
        M[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.tensor([[c, s],  # new sin
                                                              [-s, c]])  # new cos
    return M.float()


_BASE = "use the base argument, not 10000: check also tries base=100."
_FIRST_ROWS = ("position p of the batch gets row p of the table: add pe[:L], the first L rows, "
               "with L = x.shape[1].")
_EXP, _BLOCK = "(2 * i / d_model)", "M[2 * i: 2 * i + 2, 2 * i: 2 * i + 2]"
_TABLE_SLIPS = slips(sinusoidal_encoding, (
    ("P1", "doubled exponent", ("(two_i / d_model)", "(2 * two_i / d_model)"), None),
    ("P2", "halves instead of interleaved", ("if not interleaved", "if 1"), None),
    ("P3", "first frequency off by one", ("(two_i / d_model)", "((two_i + 2) / d_model)"), None),
    ("P5", "sin and cos swapped", [("0::2] = torch.sin", "1::2] = torch.sin"),
                                   ("1::2] = torch.cos", "0::2] = torch.cos")], None),
    (None, "halved exponent", ("(two_i / d_model)", "(two_i / 2 / d_model)"), "the exponent is "
     "2i/d_model, with 2i the even column index (0, 2, 4, ...), not the pair index i (0, 1, 2, "
     "...)."),
    (None, "multiplied by the power", ("position / base", "position * base"), "w_i = base ** "
     "(-2i/d_model) is below 1: divide the position by base ** (2i/d_model), do not multiply."),
    (None, "one frequency per column", [("arange(0, d_model, 2,", "arange(0, d_model, 1,"),
                                        ("sin(angle)", "sin(angle[:, 0::2])"),
                                        ("cos(angle)", "cos(angle[:, 1::2])")], "both columns of a "
     "pair share one angle: column 2i+1 uses the frequency of column 2i, base ** (-2i/d_model)."),
    (None, "base ignored", ("/ base **", "/ 10000.0 **"), _BASE),
    (None, "positions from 1", ("arange(max_len,", "arange(1, max_len + 1,"), "positions start "
     "at 0: row 0 is sin 0, cos 0, ... = 0, 1, 0, 1, ...; use torch.arange(max_len)."),
    (None, "integer exponent", ("(two_i / d_model)", "(two_i // d_model)"), "every column pair "
     "turns at frequency 1: is 2 * i // d_model (integer division, always 0) in your exponent? "
     "Use / for 2i / d_model.")))
_ADD_SLIPS = swaps(add_positional_encoding, "x + pe[:L]", (
    ("P4", "sliced on the feature axis", "x + pe[:, :L]", None),
    (None, "table not sliced", "x + pe", "the table has max_len rows but the sequence has only L "
     "positions: add pe[:L]."),
    (None, "cut to the batch size", "x + pe[:x.shape[0]]", "x is batch first, (B, L, d_model): L "
     "is x.shape[1]; x.shape[0] is the batch size."),
    (None, "cut to d_model rows", "x + pe[:x.shape[-1]]", "x.shape[-1] is d_model; the number of "
     "positions is L = x.shape[1]: add pe[:L]."),
    (None, "rows 1 .. L", "x + pe[1:L + 1]", _FIRST_ROWS),
    (None, "the last L rows", "x + pe[-L:]", _FIRST_ROWS),
    (None, "scaled by sqrt(d_model)", "x + math.sqrt(x.shape[-1]) * pe[:L]", "add the table as it "
     "is: the sqrt(d_model) factor belongs to the token embeddings (notebook 05), never to the "
     "positional encoding."),
    (None, "one row per sentence", "x + pe[:x.shape[0], None]", "each position gets its own row: "
     "pe[:L] with L = x.shape[1] has shape (L, d_model) and broadcasts over the batch; "
     "pe[:B][:, None] gives every position of sentence b the same row b."),
    (None, "multiplied", "x * pe[:L]", "the encoding is added to the embeddings (x + pe[:L]), not "
     "multiplied.")))
_ROTATION_SLIPS = slips(pe_rotation, (
    (None, "rotation by -k", (", math.sin(angle)", ", -math.sin(angle)"), "your matrix rotates "
     "by -k (it gives PE[p - k]): check the signs, sin(a + b) = sin a cos b + cos a sin b."),
    ("P2", "blocks on the two halves", (_BLOCK, "M[i::d_model // 2, i::d_model // 2]"), None),
    ("P1", "doubled exponent", (_EXP, "(4 * i / d_model)"), None),
    (None, "halved exponent", (_EXP, "(i / d_model)"), "pair i turns by k * w_i with w_i = "
     "base ** (-2i/d_model): 2i in the exponent, not i."),
    (None, "no frequency", ("k / base ** " + _EXP, "k"), "pair i turns by k * w_i, not by k: "
     "include w_i = base ** (-2i/d_model)."),
    (None, "base ignored", ("k / base", "k / 10000.0"), _BASE),
    (None, "blocks at i", (_BLOCK, "M[i: i + 2, i: i + 2]"), "pair i's block sits on rows and "
     "columns 2i and 2i+1 (M[2*i:2*i+2, 2*i:2*i+2]), so the blocks do not overlap."),
    (None, "sin on the diagonal", ("c, s =", "s, c ="), "the block is [[cos b, sin b], [-sin b, "
     "cos b]]: cosines on the diagonal.")))


EXERCISES: dict[str, Exercise] = {
    "sinusoidal_encoding": Exercise(
        reference=sinusoidal_encoding, sources=(sinusoidal_encoding,), pitfalls=_TABLE_SLIPS,
        atol=1e-4, make_cases=lambda g: [
            Case("max_len=10, d_model=8", (10, 8)), Case("max_len=50, d_model=16", (50, 16)),
            Case("base=100", (6, 4), {"base": 100.0}), Case("max_len=1, d_model=2", (1, 2))]),
    "add_positional_encoding": Exercise(
        reference=add_positional_encoding, sources=(add_positional_encoding,), pitfalls=_ADD_SLIPS,
        make_cases=lambda g: [
            Case("L=5 < max_len=12", (randn(g, 2, 5, 8), sinusoidal_encoding(12, 8))),
            Case("L = max_len", (randn(g, 1, 3, 4), sinusoidal_encoding(3, 4))),
            Case("length 1", (randn(g, 2, 1, 4), sinusoidal_encoding(6, 4))),
            Case("L = d_model", (randn(g, 2, 8, 8), sinusoidal_encoding(16, 8)))]),
    "pe_rotation": Exercise(
        reference=pe_rotation, sources=(pe_rotation,), atol=1e-4, pitfalls=_ROTATION_SLIPS,
        make_cases=lambda g: [
            Case("k=1, d_model=4", (1, 4)), Case("k=3, d_model=8", (3, 8)),
            Case("k=5, d_model=16, base=100", (5, 16), {"base": 100.0}),
            Case("k=0 (the identity)", (0, 6)), Case("d_model=2", (2, 2))]),
}
