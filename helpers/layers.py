"""LayerNorm and the feed-forward network (notebook 04); encoder (05) and decoder (07) layers.

Paper, section 3.1: every sub-layer is wrapped as ``LayerNorm(x + Sublayer(x))`` ("post-norm",
the paper's layout and the default here). ``norm_first=True`` gives the "pre-norm" layout
``x + Sublayer(LayerNorm(x))``, which trains more easily in deep stacks; pre-norm stacks end with
one more LayerNorm, as ``nn.TransformerEncoder(norm=...)`` does.

Attribute names follow ``nn.TransformerEncoderLayer`` so that ``helpers.interop`` can copy weights.
"""

import torch
from torch import nn

from .attention import MultiHeadAttention
from .checks import check_mask


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
               eps: float = 1e-5) -> torch.Tensor:
    """Normalise each vector over its last axis (features), then scale and shift per feature."""
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = x.var(dim=-1, keepdim=True, unbiased=False)  # biased: divide by d, as nn.LayerNorm
    x_hat = (x - mean) / torch.sqrt(var + eps)  # epsilon inside the square root
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


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each with a residual path and a LayerNorm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False, activation="relu"):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)  # section 5.4

    def _self_attention(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask))

    def _feed_forward(self, x):
        return self.dropout2(self.feed_forward(x))

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        """``x (B, L, d_model)``; ``mask`` bool, broadcastable to ``(B, h, L, L)``."""
        if self.norm_first:  # pre-norm: x + Sublayer(LayerNorm(x))
            x = x + self._self_attention(self.norm1(x), mask)
            return x + self._feed_forward(self.norm2(x))
        x = self.norm1(x + self._self_attention(x, mask))  # post-norm: LayerNorm(x + Sublayer(x))
        return self.norm2(x + self._feed_forward(x))


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder's memory, then feed-forward."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False, activation="relu"):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1, self.norm2, self.norm3 = (LayerNorm(d_model) for _ in range(3))
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(3))

    def _self_attention(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask))

    def _cross_attention(self, x, memory, mask):  # queries from x, keys and values from memory
        return self.dropout2(self.cross_attn(x, memory, memory, mask))

    def _feed_forward(self, x):
        return self.dropout3(self.feed_forward(x))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        """``x (B, T, d_model)``, ``memory (B, S, d_model)`` -> ``(B, T, d_model)``; ``tgt_mask``
        broadcasts to ``(B, h, T, T)``, ``memory_mask`` to ``(B, h, T, S)``."""
        if self.norm_first:  # pre-norm: x + Sublayer(LayerNorm(x))
            x = x + self._self_attention(self.norm1(x), tgt_mask)
            x = x + self._cross_attention(self.norm2(x), memory, memory_mask)
            return x + self._feed_forward(self.norm3(x))
        # post-norm (the paper): LayerNorm(x + Sublayer(x))
        x = self.norm1(x + self._self_attention(x, tgt_mask))
        x = self.norm2(x + self._cross_attention(x, memory, memory_mask))
        return self.norm3(x + self._feed_forward(x))


def layer_stack(make_layer, n: int) -> nn.ModuleList:
    # A fresh layer each time, so every layer starts from its own random weights
    # (nn.TransformerEncoder deep-copies one layer, so all of its layers start equal).
    if n < 1:
        raise ValueError(f"num_layers must be at least 1, got {n}")
    return nn.ModuleList(make_layer() for _ in range(n))


class Encoder(nn.Module):
    """A stack of ``num_layers`` encoder layers (N = 6 in the paper)."""

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int,
                 dropout: float = 0.1, norm_first: bool = False, activation: str = "relu"):
        super().__init__()
        self.norm_first = norm_first
        self.layers = layer_stack(lambda: EncoderLayer(
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
                 dropout: float = 0.1, norm_first: bool = False, activation: str = "relu"):
        super().__init__()
        self.norm_first = norm_first
        self.layers = layer_stack(lambda: DecoderLayer(
            d_model, num_heads, d_ff, dropout, norm_first, activation), num_layers)
        self.norm = LayerNorm(d_model) if norm_first else None  # pre-norm's final LayerNorm

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        B, T, S = x.shape[0], x.shape[1], memory.shape[1]
        check_mask(tgt_mask, B, T, T, "Decoder: tgt_mask")  # before any work
        check_mask(memory_mask, B, T, S, "Decoder: memory_mask")
        for layer in self.layers:  # every layer reads the same memory
            x = layer(x, memory, tgt_mask, memory_mask)
        return x if self.norm is None else self.norm(x)
