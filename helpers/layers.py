"""LayerNorm, the feed-forward network and the residual sub-layer (notebook 04); encoder (05) and
decoder (07) layers; RMSNorm and SwiGLU, the modern block's replacements (notebook 12).

Post-norm ``LayerNorm(x + Sublayer(x))`` is the paper's layout (section 3.1) and the default;
``norm_first=True``: pre-norm ``x + Sublayer(LayerNorm(x))``, whose stacks end with a LayerNorm.
Attribute names follow ``nn.TransformerEncoderLayer``, so ``helpers.interop`` can copy weights.
"""

from typing import Callable

import torch
from torch import nn

from .attention import MultiHeadAttention
from .checks import check_mask, check_sizes


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
               eps: float = 1e-5) -> torch.Tensor:
    """Normalise each vector over its last axis (features), then scale and shift per feature."""
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    centred = x - mean  # each vector's deviations from its own mean
    var = (centred ** 2).mean(dim=-1, keepdim=True)  # biased: divide by d, as nn.LayerNorm
    x_hat = centred / torch.sqrt(var + eps)  # epsilon inside the square root
    return x_hat * weight + bias  # one gain and one bias per feature


class LayerNorm(nn.Module):
    """Layer normalisation (Ba et al., 2016) with a gain ``weight`` and a ``bias`` per feature."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError(
                f"LayerNorm({self.weight.shape[0]}) expects a last axis of size "
                f"{self.weight.shape[0]}, got input of shape {tuple(x.shape)}"
            )
        return layer_norm(x, self.weight, self.bias, self.eps)


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


class FeedForward(nn.Module):
    """Position-wise feed-forward network, equation (2): ``max(0, x W_1 + b_1) W_2 + b_2``;
    ``activation="silu"`` replaces ``max(0, .)`` by ``x * sigmoid(x)`` (swish, notebook 15)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        if activation not in ("relu", "silu"):
            raise ValueError(f"FeedForward: activation is 'relu' or 'silu', got {activation!r}")
        self.activation = activation  # the name of a function of torch.nn.functional
        self.linear1 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        activation = getattr(nn.functional, self.activation)  # F.relu, or F.silu
        return self.linear2(self.dropout(activation(self.linear1(x))))  # (B, L, d_model)


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


def residual_sublayer(x: torch.Tensor, sublayer: Callable, norm: Callable,
                      norm_first: bool) -> torch.Tensor:
    """One sub-layer with its residual path and LayerNorm (section 3.1 of the paper).

    Post-norm (the paper, ``norm_first=False``): ``norm(x + sublayer(x))``. Pre-norm:
    ``x + sublayer(norm(x))``. Every layer of the course calls it once per sub-layer.
    """
    if norm_first:
        return x + sublayer(norm(x))  # the residual path carries x itself, never normalised
    return norm(x + sublayer(x))  # add first, then normalise


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each with a residual path and a LayerNorm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False, activation="relu"):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)  # section 5.4

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        """``x (B, L, d_model)``; ``mask`` bool, broadcastable to ``(B, h, L, L)``."""
        def self_attention(y):
            return self.dropout1(self.self_attn(y, y, y, mask))

        def feed_forward(y):
            return self.dropout2(self.feed_forward(y))

        x = residual_sublayer(x, self_attention, self.norm1, self.norm_first)
        return residual_sublayer(x, feed_forward, self.norm2, self.norm_first)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder's memory, then feed-forward."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False, activation="relu"):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout, cross=True)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1, self.norm2, self.norm3 = (LayerNorm(d_model) for _ in range(3))
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(3))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None, cache=None):
        """``x (B, T, d_model)``, ``memory (B, S, d_model)`` -> ``(B, T, d_model)``; ``tgt_mask``
        broadcasts to ``(B, h, T, T)``, ``memory_mask`` to ``(B, h, T, S)``. ``cache``: a
        ``KVCache``; ``x`` then holds the new positions only (notebook 10)."""
        def self_attention(y):
            return self.dropout1(self.self_attn(y, y, y, tgt_mask, cache))

        def cross_attention(y):  # queries from the target, keys and values from the memory
            return self.dropout2(self.cross_attn(y, memory, memory, memory_mask, cache))

        def feed_forward(y):
            return self.dropout3(self.feed_forward(y))

        x = residual_sublayer(x, self_attention, self.norm1, self.norm_first)
        x = residual_sublayer(x, cross_attention, self.norm2, self.norm_first)
        return residual_sublayer(x, feed_forward, self.norm3, self.norm_first)


def layer_stack(make_layer, n: int) -> nn.ModuleList:
    # A fresh layer each time, so every layer starts from its own random weights
    # (nn.TransformerEncoder deep-copies one layer, so all of its layers start equal).
    if n < 1:
        raise ValueError(f"num_layers must be at least 1, got {n}")
    return nn.ModuleList(make_layer() for _ in range(n))


class Encoder(nn.Module):
    """A stack of ``num_layers`` encoder layers (N = 6 in the paper)."""

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int,
                 dropout: float = 0.1, norm_first: bool = False, activation: str = "relu",
                 layer=None):
        super().__init__()
        self.norm_first = norm_first
        layer = layer or EncoderLayer  # another class with EncoderLayer's arguments, if given
        self.layers = layer_stack(lambda: layer(
            d_model, num_heads, d_ff, dropout, norm_first, activation), num_layers)
        self.norm = LayerNorm(d_model) if norm_first else None  # pre-norm's final LayerNorm

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        check_mask(mask, x.shape[0], x.shape[1], x.shape[1], "Encoder")  # before any work
        for layer in self.layers:
            x = layer(x, mask)
        return x if self.norm is None else self.norm(x)


class Decoder(nn.Module):
    """A stack of ``num_layers`` decoder layers (N = 6 in the paper)."""

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int,
                 dropout: float = 0.1, norm_first: bool = False, activation: str = "relu",
                 layer=None):
        super().__init__()
        self.norm_first = norm_first
        layer = layer or DecoderLayer  # another class with DecoderLayer's arguments, if given
        self.layers = layer_stack(lambda: layer(
            d_model, num_heads, d_ff, dropout, norm_first, activation), num_layers)
        self.norm = LayerNorm(d_model) if norm_first else None  # pre-norm's final LayerNorm

    def forward(self, x, memory, tgt_mask=None, memory_mask=None, cache=None):
        """``cache``: a ``KVCache``; ``x`` holds the new positions, ``tgt_mask`` every key."""
        B, T, S = x.shape[0], x.shape[1], memory.shape[1]
        keys = T if cache is None else None  # with a cache, the earlier positions are keys too
        check_mask(tgt_mask, B, T, keys, "Decoder: tgt_mask")  # before any work
        check_mask(memory_mask, B, T, S, "Decoder: memory_mask")
        given = {} if cache is None else {"cache": cache}  # a learner's layer takes no cache
        for layer in self.layers:  # every layer reads the same memory
            x = layer(x, memory, tgt_mask, memory_mask, **given)
        return x if self.norm is None else self.norm(x)
