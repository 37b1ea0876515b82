"""Scaled dot-product attention (notebook 01) and multi-head attention (notebook 03).

Paper: Vaswani et al. (2017), "Attention Is All You Need", section 3.2, equation (1):
``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V``.

Masks are boolean and **True means "may attend"** (the ``F.scaled_dot_product_attention``
convention). Shapes: ``B`` batch, ``h`` heads, ``Lq`` queries, ``Lk`` keys, ``d_k`` head size.
"""

import math

import torch
from torch import nn


def check_attention_inputs(query, key, value, mask):
    """Clear errors for bad shapes or masks, before torch would fail deep inside."""
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError(
            "attention expects query (..., Lq, d_k), key (..., Lk, d_k) and value (..., Lk, d_v), "
            f"got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
        )
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must share their last size d_k, got query {tuple(query.shape)} "
            f"and key {tuple(key.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same number of positions Lk, got key "
            f"{tuple(key.shape)} and value {tuple(value.shape)}"
        )
    if mask is None:
        return
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a bool tensor (True = may attend), got dtype {mask.dtype}; "
            "convert an additive float mask with mask == 0"
        )
    scores_shape = (*torch.broadcast_shapes(query.shape[:-2], key.shape[:-2]),
                    query.shape[-2], key.shape[-2])
    try:
        ok = torch.broadcast_shapes(mask.shape, scores_shape) == torch.Size(scores_shape)
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention scores "
            f"(..., Lq, Lk) = {tuple(scores_shape)}"
        )


def scaled_dot_product_attention(query, key, value, mask=None, dropout=None):
    """``softmax(Q K^T / sqrt(d_k)) V``, returning ``(output, weights)``.

    Args:
        query: ``(..., Lq, d_k)``; key: ``(..., Lk, d_k)``; value: ``(..., Lk, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., Lq, Lk)``, True = may attend.
        dropout: optional ``nn.Dropout`` applied to the weights before they mix the values.

    Returns:
        output ``(..., Lq, d_v)`` and weights ``(..., Lq, Lk)`` (before dropout, for plotting).
        A query with no allowed key gets output 0 and weights 0, never NaN.
    """
    check_attention_inputs(query, key, value, mask)
    d_k = query.shape[-1]
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., Lq, Lk)
    if mask is not None:
        # The most negative finite number, not -inf: a fully masked row then gives a
        # uniform softmax (finite, with finite gradients) that the line below zeroes.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)  # each query's weights over the keys sum to 1
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # rows with no allowed key become all 0
    mixed = weights if dropout is None else dropout(weights)
    return mixed @ value, weights


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, L, d_model) -> (B, h, L, d_k)``: each head gets a contiguous block of d_k features."""
    B, L, d_model = x.shape
    d_k = d_model // num_heads
    x = x.view(B, L, num_heads, d_k)  # (B, L, d_model) -> (B, L, h, d_k)
    return x.transpose(1, 2)  # (B, L, h, d_k) -> (B, h, L, d_k)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``(B, h, L, d_k) -> (B, L, h * d_k)``: the inverse of :func:`split_heads`."""
    B, h, L, d_k = x.shape
    x = x.transpose(1, 2)  # (B, h, L, d_k) -> (B, L, h, d_k): heads back next to d_k
    return x.reshape(B, L, h * d_k)  # (B, L, h, d_k) -> (B, L, d_model)


class MultiHeadAttention(nn.Module):
    """Multi-head attention, section 3.2.2 of the paper. Taught in notebook 03.

    ``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O`` with
    ``head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i)``. The h projections of size d_k are stored
    side by side in one ``nn.Linear(d_model, d_model)`` each for Q, K and V.

    After every call, ``attention_weights`` holds the per-head weights ``(B, h, Lq, Lk)``.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(
                f"d_model={d_model} must be divisible by num_heads={num_heads} "
                "so that every head gets d_k = d_model / num_heads features"
            )
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights = None

    def _check(self, name, x):
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"{name} must have shape (B, L, d_model={self.d_model}), got {tuple(x.shape)}"
            )

    def forward(self, query, key, value, mask=None, cache=None):
        """``query (B, Lq, d_model)``, ``key``/``value (B, Lk, d_model)`` -> ``(B, Lq, d_model)``.

        ``mask`` is bool, broadcastable to ``(B, h, Lq, Lk)``, True = may attend.
        ``cache`` (a dict, used by decoding in notebook 10) keeps the projected keys and
        values: new ones are appended for self-attention, and with ``cache["static"]`` they
        are computed once (cross-attention over the encoder's memory) and reused.
        """
        self._check("query", query)
        q = split_heads(self.w_q(query), self.num_heads)  # (B, h, Lq, d_k)
        if cache is not None and cache.get("static") and "k" in cache:
            k, v = cache["k"], cache["v"]
        else:
            self._check("key", key)
            self._check("value", value)
            k = split_heads(self.w_k(key), self.num_heads)  # (B, h, Lk, d_k)
            v = split_heads(self.w_v(value), self.num_heads)  # (B, h, Lk, d_k)
            if cache is not None:
                if "k" in cache:  # self-attention: the past keys and values come first
                    k = torch.cat([cache["k"], k], dim=2)  # (B, h, Lpast + Lk, d_k)
                    v = torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
        out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout)
        self.attention_weights = weights.detach()  # (B, h, Lq, Lk)
        return self.w_o(merge_heads(out))  # (B, Lq, d_model)
