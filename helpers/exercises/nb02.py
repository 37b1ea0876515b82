"""Notebook 02's exercises: ``sinusoidal_encoding``, ``add_positional_encoding`` and
``pe_rotation``, with the positional-encoding bugs P1-P5 and other likely slips as buggy variants.
"""

import math

import torch

from ..positional import sinusoidal_encoding
from .engine import Case, Exercise, Pitfall, randn

# ----------------------------------------------------------------------------------------------
# References that helpers/ has no function for (shown by solution())
# ----------------------------------------------------------------------------------------------

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


# ----------------------------------------------------------------------------------------------
# Buggy variants, each with the learner's signature
# ----------------------------------------------------------------------------------------------

def _two_i(d_model):
    return torch.arange(0, d_model, 2, dtype=torch.float64)  # 0, 2, 4, ...: even column indices


def _angles(max_len, d_model, base, two_i):
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    return position / base ** (two_i / d_model)  # (max_len, d_model / 2)


def _interleave(even, odd):
    pe = torch.zeros(even.shape[0], 2 * even.shape[1], dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = even, odd
    return pe.float()


def _pe_doubled_exponent(max_len, d_model, base=10000.0):
    """P1: the loop index already steps 0, 2, 4, ... and is doubled again in the exponent."""
    angle = _angles(max_len, d_model, base, 2 * _two_i(d_model))
    return _interleave(torch.sin(angle), torch.cos(angle))


def _pe_halves(max_len, d_model, base=10000.0):
    """P2: sines in the first half of the columns, cosines in the second half."""
    angle = _angles(max_len, d_model, base, _two_i(d_model))
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1).float()


def _pe_frequency_off_by_one(max_len, d_model, base=10000.0):
    """P3: ``k = dimension // 2 + 1``: every frequency shifted by one pair, column 0 != sin(p)."""
    angle = _angles(max_len, d_model, base, _two_i(d_model) + 2)
    return _interleave(torch.sin(angle), torch.cos(angle))


def _pe_sin_cos_swapped(max_len, d_model, base=10000.0):
    """P5: cosines on the even columns, sines on the odd ones."""
    angle = _angles(max_len, d_model, base, _two_i(d_model))
    return _interleave(torch.cos(angle), torch.sin(angle))


def _pe_halved_exponent(max_len, d_model, base=10000.0):
    """The pair index i used where the exponent wants 2i: every pair turns too fast."""
    angle = _angles(max_len, d_model, base, _two_i(d_model) / 2)
    return _interleave(torch.sin(angle), torch.cos(angle))


def _pe_times_power(max_len, d_model, base=10000.0):
    """The position multiplied by base ** (2i / d_model) instead of divided by it."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    angle = position * base ** (_two_i(d_model) / d_model)
    return _interleave(torch.sin(angle), torch.cos(angle))


def _pe_column_frequencies(max_len, d_model, base=10000.0):
    """Each column its own frequency, base ** (column / d_model): the odd column of a pair no
    longer shares the angle of the even one."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    angle = position / base ** (torch.arange(d_model, dtype=torch.float64) / d_model)
    pe = torch.where(torch.arange(d_model) % 2 == 0, torch.sin(angle), torch.cos(angle))
    return pe.float()


def _pe_base_ignored(max_len, d_model, base=10000.0):
    """10000 written where the base argument belongs."""
    return sinusoidal_encoding(max_len, d_model)


def _pe_positions_from_1(max_len, d_model, base=10000.0):
    """Positions 1 .. max_len instead of 0 .. max_len - 1."""
    return sinusoidal_encoding(max_len + 1, d_model, base)[1:]


def _pe_integer_exponent(max_len, d_model, base=10000.0):
    """``2 * i // d_model`` in integer arithmetic: the exponent is 0, every frequency is 1."""
    angle = _angles(max_len, d_model, base, torch.zeros(d_model // 2, dtype=torch.float64))
    return _interleave(torch.sin(angle), torch.cos(angle))


def _add_pe_slicing_features(x, pe):
    """P4: the table is cut along the features instead of the positions."""
    return x + pe[:, :x.shape[1]]


def _add_pe_without_slicing(x, pe):
    """The whole (max_len, d_model) table added to a shorter sequence."""
    return x + pe


def _add_pe_batch_rows(x, pe):
    """The table cut to the batch size, ``pe[:x.shape[0]]``, instead of the sequence length."""
    return x + pe[:x.shape[0]]


def _add_pe_d_model_rows(x, pe):
    """The table cut to ``x.shape[-1]`` (d_model) rows instead of ``x.shape[1]`` (L)."""
    return x + pe[:x.shape[-1]]


def _add_pe_from_1(x, pe):
    """Rows 1 .. L instead of 0 .. L - 1."""
    return x + pe[1:x.shape[1] + 1]


def _add_pe_last_rows(x, pe):
    """The last L rows of the table instead of the first L."""
    return x + pe[-x.shape[1]:]


def _add_pe_multiplied(x, pe):
    """The table multiplied into the embeddings instead of added."""
    return x * pe[:x.shape[1]]


def _rotation_doubled_exponent(k, d_model, base=10000.0):
    """P1: the loop steps 0, 2, 4, ... and the exponent doubles it again."""
    return _rotation(k, d_model, base, lambda i: 4 * i / d_model)


def _rotation_halved_exponent(k, d_model, base=10000.0):
    """The pair index i in the exponent where 2i belongs."""
    return _rotation(k, d_model, base, lambda i: i / d_model)


def _rotation_no_frequency(k, d_model, base=10000.0):
    """Every pair rotated by k radians: the frequency w_i left out."""
    return _rotation(k, d_model, base, lambda i: 0.0)


def _rotation_base_ignored(k, d_model, base=10000.0):
    """10000 written where the base argument belongs."""
    return pe_rotation(k, d_model)


def _rotation_blocks_at_i(k, d_model, base=10000.0):
    """Pair i's block written at rows and columns i, i+1 (overlapping) instead of 2i, 2i+1."""
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        angle = k / base ** (2 * i / d_model)
        c, s = math.cos(angle), math.sin(angle)
        M[i: i + 2, i: i + 2] = torch.tensor([[c, s], [-s, c]])
    return M.float()


def _rotation_sin_on_diagonal(k, d_model, base=10000.0):
    """sin and cos swapped in each block: ``[[sin, cos], [-cos, sin]]``."""
    return _rotation(k, d_model, base, lambda i: 2 * i / d_model, swap=True)


def _rotation(k, d_model, base, exponent, swap=False):
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        angle = k / base ** exponent(i)
        c, s = math.cos(angle), math.sin(angle)
        if swap:
            c, s = s, c
        M[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.tensor([[c, s], [-s, c]])
    return M.float()


def _rotation_by_minus_k(k, d_model, base=10000.0):
    """Each 2x2 block transposed, ``[[cos, -sin], [sin, cos]]``: a rotation by -k."""
    return pe_rotation(k, d_model, base).T


def _rotation_on_halves(k, d_model, base=10000.0):
    """P2: column i paired with column i + d_model/2, as if sines filled the first half."""
    half = d_model // 2
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(half):
        angle = k / base ** (2 * i / d_model)
        c, s = math.cos(angle), math.sin(angle)
        M[i, i], M[i, i + half] = c, s
        M[i + half, i], M[i + half, i + half] = -s, c
    return M.float()


# ----------------------------------------------------------------------------------------------
# Test cases (seeded; edge cases chosen so that each buggy variant shows)
# ----------------------------------------------------------------------------------------------

def _sinusoidal_cases(g):
    return [
        Case("max_len=10, d_model=8", (10, 8)),
        Case("max_len=50, d_model=16", (50, 16)),
        Case("base=100", (6, 4), {"base": 100.0}),
        Case("max_len=1, d_model=2", (1, 2)),
    ]


def _add_pe_cases(g):
    return [
        Case("L=5 < max_len=12", (randn(g, 2, 5, 8), sinusoidal_encoding(12, 8))),
        Case("L = max_len", (randn(g, 1, 3, 4), sinusoidal_encoding(3, 4))),
        Case("length 1", (randn(g, 2, 1, 4), sinusoidal_encoding(6, 4))),
        Case("L = d_model", (randn(g, 2, 8, 8), sinusoidal_encoding(16, 8))),
    ]


def _pe_rotation_cases(g):
    return [
        Case("k=1, d_model=4", (1, 4)),
        Case("k=3, d_model=8", (3, 8)),
        Case("k=5, d_model=16, base=100", (5, 16), {"base": 100.0}),
        Case("k=0 (the identity)", (0, 6)),
        Case("d_model=2", (2, 2)),
    ]


_HINT_P1 = ("the exponent is 2i/d_model where 2i is the even column index (0, 2, 4, ...): do not "
            "double it again.")
_HINT_BASE = "use the base argument, not 10000: check also tries base=100."
_HINT_FIRST_ROWS = ("position p of the batch gets row p of the table: add pe[:L], the first L "
                    "rows, with L = x.shape[1].")

def _add_pe_scaled(x, pe):
    """The positional encoding scaled by sqrt(d_model) too (the factor is the embeddings')."""
    return x + math.sqrt(x.shape[-1]) * pe[:x.shape[1]]


def _add_pe_batch_broadcast(x, pe):
    """Row b of the table added to every position of sentence b: ``pe[:B][:, None]``."""
    return x + pe[:x.shape[0]][:, None, :]


EXERCISES: dict[str, Exercise] = {
    "sinusoidal_encoding": Exercise(
        reference=sinusoidal_encoding,
        make_cases=_sinusoidal_cases,
        sources=(sinusoidal_encoding,),
        atol=1e-4,
        pitfalls=(
            Pitfall("P1", "doubled exponent", _pe_doubled_exponent, _HINT_P1),
            Pitfall("P2", "halves instead of interleaved", _pe_halves,
                    "even columns sin, odd columns cos (interleaved, not two halves)."),
            Pitfall("P3", "first frequency off by one", _pe_frequency_off_by_one,
                    "column 0 should be sin(position): the first pair has frequency 1."),
            Pitfall("P5", "sin and cos swapped", _pe_sin_cos_swapped,
                    "PE[0] should be 0, 1, 0, 1, ...: sin on even columns, cos on odd ones."),
            Pitfall(None, "halved exponent", _pe_halved_exponent,
                    "the exponent is 2i/d_model, with 2i the even column index (0, 2, 4, ...), "
                    "not the pair index i (0, 1, 2, ...)."),
            Pitfall(None, "multiplied by the power", _pe_times_power,
                    "w_i = base ** (-2i/d_model) is below 1: divide the position by "
                    "base ** (2i/d_model), do not multiply."),
            Pitfall(None, "one frequency per column", _pe_column_frequencies,
                    "both columns of a pair share one angle: column 2i+1 uses the frequency of "
                    "column 2i, base ** (-2i/d_model)."),
            Pitfall(None, "base ignored", _pe_base_ignored, _HINT_BASE),
            Pitfall(None, "positions from 1", _pe_positions_from_1,
                    "positions start at 0: row 0 is sin 0, cos 0, ... = 0, 1, 0, 1, ...; use "
                    "torch.arange(max_len)."),
            Pitfall(None, "integer exponent", _pe_integer_exponent,
                    "every column pair turns at frequency 1: is 2 * i // d_model (integer "
                    "division, always 0) in your exponent? Use / for 2i / d_model."),
        ),
    ),
    "add_positional_encoding": Exercise(
        reference=add_positional_encoding,
        make_cases=_add_pe_cases,
        sources=(add_positional_encoding,),
        pitfalls=(
            Pitfall("P4", "sliced on the feature axis", _add_pe_slicing_features,
                    "slice positions, not features: pe[:L] keeps the first L rows (positions)."),
            Pitfall(None, "table not sliced", _add_pe_without_slicing,
                    "the table has max_len rows but the sequence has only L positions: "
                    "add pe[:L]."),
            Pitfall(None, "cut to the batch size", _add_pe_batch_rows,
                    "x is batch first, (B, L, d_model): L is x.shape[1]; x.shape[0] is the batch "
                    "size."),
            Pitfall(None, "cut to d_model rows", _add_pe_d_model_rows,
                    "x.shape[-1] is d_model; the number of positions is L = x.shape[1]: add "
                    "pe[:L]."),
            Pitfall(None, "rows 1 .. L", _add_pe_from_1, _HINT_FIRST_ROWS),
            Pitfall(None, "the last L rows", _add_pe_last_rows, _HINT_FIRST_ROWS),
            Pitfall(None, "scaled by sqrt(d_model)", _add_pe_scaled,
                    "add the table as it is: the sqrt(d_model) factor belongs to the token "
                    "embeddings (notebook 05), never to the positional encoding."),
            Pitfall(None, "one row per sentence", _add_pe_batch_broadcast,
                    "each position gets its own row: pe[:L] with L = x.shape[1] has shape "
                    "(L, d_model) and broadcasts over the batch; pe[:B][:, None] gives every "
                    "position of sentence b the same row b."),
            Pitfall(None, "multiplied", _add_pe_multiplied,
                    "the encoding is added to the embeddings (x + pe[:L]), not multiplied."),
        ),
    ),
    "pe_rotation": Exercise(
        reference=pe_rotation,
        make_cases=_pe_rotation_cases,
        sources=(pe_rotation,),
        atol=1e-4,
        pitfalls=(
            Pitfall(None, "rotation by -k", _rotation_by_minus_k,
                    "your matrix rotates by -k (it gives PE[p - k]): check the signs, "
                    "sin(a + b) = sin a cos b + cos a sin b."),
            Pitfall("P2", "blocks on the two halves", _rotation_on_halves,
                    "PE interleaves its columns (even columns sin, odd columns cos), so each 2x2 "
                    "block couples columns 2i and 2i+1."),
            Pitfall("P1", "doubled exponent", _rotation_doubled_exponent, _HINT_P1),
            Pitfall(None, "halved exponent", _rotation_halved_exponent,
                    "pair i turns by k * w_i with w_i = base ** (-2i/d_model): 2i in the "
                    "exponent, not i."),
            Pitfall(None, "no frequency", _rotation_no_frequency,
                    "pair i turns by k * w_i, not by k: include w_i = base ** (-2i/d_model)."),
            Pitfall(None, "base ignored", _rotation_base_ignored, _HINT_BASE),
            Pitfall(None, "blocks at i", _rotation_blocks_at_i,
                    "pair i's block sits on rows and columns 2i and 2i+1 (M[2*i:2*i+2, "
                    "2*i:2*i+2]), so the blocks do not overlap."),
            Pitfall(None, "sin on the diagonal", _rotation_sin_on_diagonal,
                    "the block is [[cos b, sin b], [-sin b, cos b]]: cosines on the diagonal."),
        ),
    ),
}
