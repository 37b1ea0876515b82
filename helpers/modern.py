"""The modern block's parts, as Llama-style models use them. Taught in notebook 12.

Since 2017 the Transformer block has changed in small places: ``RMSNorm`` instead of LayerNorm
(Zhang and Sennrich, 2019), the gated ``SwiGLU`` instead of the ReLU feed-forward network
(Shazeer, 2020), and rotary position embeddings (RoPE; Su et al., 2021), which rotate the
queries and keys inside attention (``RotaryAttention``) instead of adding sinusoids to the
embeddings. ``helpers.gpt.gpt_block`` swaps them into notebook 05's encoder layer.

Shapes: ``L`` length, ``d_k`` the size of one head, ``h`` heads.
"""

import torch
from torch import nn

from .attention import MultiHeadAttention, merge_heads, scaled_dot_product_attention, split_heads
from .checks import check_sizes


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last axis: notebook 04's LayerNorm
    without subtracting the mean and without the bias (Zhang and Sennrich, 2019)."""
    rms = x.pow(2).mean(dim=-1, keepdim=True).add(eps).sqrt()  # (..., 1): no mean removed
    return x / rms * weight


class RMSNorm(nn.Module):
    """:func:`rms_norm` with a learned gain per feature, as ``torch.nn.RMSNorm``."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        check_sizes("RMSNorm", d_model=d_model)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


class SwiGLU(nn.Module):
    """``(silu(x W1) * (x W3)) W2``: a gated feed-forward network (Shazeer, 2020)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)  # the gate
        self.w3 = nn.Linear(d_model, d_ff, bias=False)  # the value it lets through
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.dropout(nn.functional.silu(self.w1(x)) * self.w3(x)))


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


class RotaryAttention(MultiHeadAttention):
    """Notebook 03's multi-head attention with the queries and keys rotated by their position.

    The keys sit at positions ``0 ... Lk - 1`` and the queries at ``start ... start + Lq - 1``:
    ``start = 0`` for a whole sequence (self-attention), ``start = Lk - Lq`` for the last
    ``Lq`` positions of it (new tokens over every key so far, as with a KV cache).
    """

    def forward(self, query, key, value, mask=None, start: int = 0):
        q = split_heads(self.w_q(query), self.num_heads)  # (B, h, Lq, d_k)
        k = split_heads(self.w_k(key), self.num_heads)  # (B, h, Lk, d_k)
        v = split_heads(self.w_v(value), self.num_heads)
        q = apply_rope(q, rope_angles(q.shape[2], self.d_k, start=start).to(q.device))
        k = apply_rope(k, rope_angles(k.shape[2], self.d_k).to(k.device))  # from position 0
        out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout)
        self.attention_weights = weights.detach()
        return self.w_o(merge_heads(out))  # (B, Lq, d_model)
