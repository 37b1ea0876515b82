"""Sinusoidal positional encoding, section 3.5 of the paper (notebook 02):
``PE[p, 2i] = sin(p / base**(2i / d_model))``, ``PE[p, 2i + 1] = cos(p / base**(2i / d_model))``.
Rotary positions (RoPE; Su et al., 2021; notebook 12) rotate the queries and keys by the same
frequencies inside attention instead (``MultiHeadAttention(rope=True)``).
"""

import torch
from torch import nn

from .checks import check_sizes


def sinusoidal_encoding(max_len: int, d_model: int, base: float = 10000.0,
                        interleaved: bool = True) -> torch.Tensor:
    """The ``(max_len, d_model)`` table of sinusoidal positional encodings; ``interleaved=False``:
    the sines in the first half of the columns, the cosines in the second (Marian's layout)."""
    if d_model < 2 or d_model % 2 != 0:
        raise ValueError(
            f"d_model must be a positive even number (sin and cos come in pairs), got {d_model}"
        )
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d_model / 2,): 0, 2, 4, ...
    angle = position / base ** (two_i / d_model)  # (max_len, d_model / 2)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)  # even columns
    pe[:, 1::2] = torch.cos(angle)  # odd columns
    if not interleaved:  # the same columns, reordered: sines 0, 2, 4, ... then cosines 1, 3, ...
        pe = torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=-1)
    return pe.float()


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table (a buffer: moved by ``.to``, never trained) to ``(B, L,
    d_model)`` embeddings, then applies dropout."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0,
                 base: float = 10000.0, interleaved: bool = True):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.dropout = nn.Dropout(dropout)
        table = sinusoidal_encoding(max_len, d_model, base, interleaved)
        self.register_buffer("pe", table, persistent=False)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """``x (B, L, d_model)``; ``start`` is the position of ``x[:, 0]`` (KV-cache decoding)."""
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"PositionalEncoding expects (B, L, d_model={self.d_model}), "
                             f"got {tuple(x.shape)}")
        L = x.shape[1]
        if not isinstance(start, int) or start < 0:  # -5 would silently read the table's end
            raise ValueError(f"start is the position of x[:, 0], an int >= 0; got {start!r}")
        if start + L > self.max_len:
            raise ValueError(f"sequence length {start + L} is longer than max_len={self.max_len} "
                             "of the positional encoding; build it with a larger max_len")
        return self.dropout(x + self.pe[start:start + L])  # slice positions, not features


def rope_angles(length: int, d_k: int, base: float = 10000.0, start: int = 0) -> torch.Tensor:
    """``(length, d_k / 2)`` angles ``p * base^(-2i/d_k)`` of positions ``start ...``: notebook
    02's frequencies, one per pair of features ``(2i, 2i + 1)``."""
    check_sizes("rope_angles", length=length, d_k=d_k)
    if d_k % 2:
        raise ValueError(f"rope_angles: d_k must be even (features rotate in pairs), got {d_k}")
    freqs = base ** (-torch.arange(0, d_k, 2, dtype=torch.float32) / d_k)  # (d_k / 2,)
    positions = torch.arange(start, start + length, dtype=torch.float32)  # (length,)
    return positions[:, None] * freqs[None, :]


def check_rope(x: torch.Tensor, angles: torch.Tensor) -> None:
    """:func:`apply_rope`'s inputs: ``x (..., L, d_k)`` with an even ``d_k``, and one row of
    ``d_k / 2`` angles for each of its ``L`` positions."""
    if x.dim() < 2 or x.shape[-1] % 2 or angles.shape != (x.shape[-2], x.shape[-1] // 2):
        raise ValueError(f"apply_rope expects x (..., L, d_k) with an even d_k and angles "
                         f"(L, d_k / 2); got x {tuple(x.shape)} and angles {tuple(angles.shape)}")


def apply_rope(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate each feature pair ``(x[2i], x[2i+1])`` of ``x (..., L, d_k)`` by its angle
    (``angles (L, d_k / 2)``). Then ``rope(q, p) . rope(k, p')`` depends on ``p - p'`` only."""
    check_rope(x, angles)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., L, d_k / 2) each: the two halves of each pair
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
    return rotated.flatten(-2)  # (..., L, d_k / 2, 2) -> (..., L, d_k), pairs interleaved again
