"""Scaled dot-product attention (notebook 01; section 3.2 of the paper: ``softmax(Q K^T /
sqrt(d_k)) V``) and :class:`MultiHeadAttention` (notebook 03), which computes every attention of
the course, with a :class:`KVCache` (notebook 10) and rotary positions (notebook 12) as options.

Masks are boolean, **True = may attend**. Shapes: ``B`` batch, ``h`` heads, ``Lq`` queries,
``Lk`` keys, ``d_k`` head size.
"""

import math

import torch
from torch import nn

from .checks import (
    check_attention_inputs,
    check_mask,
    check_projection_inputs,
    check_tensor,
    head_size,
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
    check_tensor(x, "split_heads: x", "(B, L, d_model)")
    B, L, d_model = x.shape
    d_k = head_size(d_model, num_heads, "split_heads")  # d_model / num_heads, or a clear error
    x = x.view(B, L, num_heads, d_k)  # (B, L, d_model) -> (B, L, h, d_k)
    return x.transpose(1, 2)  # (B, L, h, d_k) -> (B, h, L, d_k)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``(B, h, L, d_k) -> (B, L, h * d_k)``: the inverse of :func:`split_heads`."""
    check_tensor(x, "merge_heads: x", "(B, h, L, d_k)")
    B, h, L, d_k = x.shape
    x = x.transpose(1, 2)  # (B, h, L, d_k) -> (B, L, h, d_k): heads back next to d_k
    return x.reshape(B, L, h * d_k)  # (B, L, h, d_k) -> (B, L, d_model)


class KVCache:
    """What decoding keeps from earlier steps (notebook 10). ``kv[attention]``: one attention
    module's keys and values ``(B, h, Lk, d_k)``: a self-attention's grow by the new positions at
    every step, a cross-attention's are the memory's, computed once. ``length``: positions done."""

    def __init__(self):
        self.kv, self.length = {}, 0  # MultiHeadAttention module -> (keys, values); positions
        self.memory = None  # the encoder output that the cross-attention entries come from

    def reorder(self, index: torch.Tensor) -> None:
        """Keep the rows of the hypotheses that survive, in their new order (beam search)."""
        self.kv = {attn: (k.index_select(0, index), v.index_select(0, index))
                   for attn, (k, v) in self.kv.items()}

    def check_memory(self, memory: torch.Tensor) -> None:
        """Keep the first step's ``memory``; later steps must pass the same numbers (beam search
        passes a view of them, ``memory.expand``), not another source's."""
        if self.memory is None:
            self.memory = memory
        elif (memory.data_ptr() != self.memory.data_ptr()  # where its numbers are stored
              or memory.shape[1:] != self.memory.shape[1:]):
            raise ValueError("decode: this KVCache holds the cross-attention keys and values of "
                             "another memory (another source); pass the first step's memory at "
                             "every step, or a new KVCache for a new source")


class MultiHeadAttention(nn.Module):
    """Multi-head attention (section 3.2.2): ``Concat(head_1, ..., head_h) W_O``, ``head_i =
    Attention(Q W_Q_i, K W_K_i, V W_V_i)``; the h projections of size d_k sit side by side in one
    ``nn.Linear(d_model, d_model)`` each. ``attention_weights``: the last ``(B, h, Lq, Lk)``.

    ``cross=True``: cross-attention, whose keys and values (the encoder's memory) a cache keeps
    from the first step. ``rope=True``: rotary positions (notebook 12), q and k rotated by their
    position. ``attend``: the attention function the heads use; assign another one to an
    instance (``mha.attend = my_attention``, same signature as
    :func:`scaled_dot_product_attention`) to run multi-head attention on it."""

    attend = staticmethod(scaled_dot_product_attention)

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 rope: bool = False, cross: bool = False):
        super().__init__()
        if rope and cross:
            raise ValueError("MultiHeadAttention: rope rotates positions of one sequence; "
                             "cross-attention (cross=True) has no shared positions to rotate")
        self.d_model, self.num_heads, self.rope, self.cross = d_model, num_heads, rope, cross
        self.d_k = head_size(d_model, num_heads, "MultiHeadAttention")  # d_model / num_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (  # one (d_model, d_model) projection each
            nn.Linear(d_model, d_model, bias=bias) for _ in range(4))
        self.dropout, self.attention_weights = nn.Dropout(dropout), None  # weights: after a call

    def forward(self, query, key, value, mask=None, cache=None):
        """``query (B, Lq, d_model)``, ``key``/``value (B, Lk, d_model)`` -> ``(B, Lq, d_model)``;
        ``mask`` bool, broadcastable to ``(B, h, Lq, Lk)``, True = may attend. ``cache``: a
        :class:`KVCache`; ``query`` holds the new positions only, ``mask`` covers every key."""
        check_projection_inputs(query, key, value, self.d_model, self.w_q.weight.dtype)
        past = None if cache is None else cache.kv.get(self)  # this module's keys and values
        q = split_heads(self.w_q(query), self.num_heads)  # (B, h, Lq, d_k)
        if self.cross and past is not None:  # cache: the memory's keys and values, from step 1
            k, v = past
        else:
            k = split_heads(self.w_k(key), self.num_heads)  # (B, h, Lk, d_k)
            v = split_heads(self.w_v(value), self.num_heads)  # (B, h, Lk, d_k)
            if self.rope:  # rotated at their positions: after the cached ones, if any
                from helpers.positional import apply_rope, rope_angles  # notebook 12's, loaded here
                start = 0 if past is None else past[0].shape[2]
                q = apply_rope(q, rope_angles(q.shape[2], self.d_k, start=start).to(q.device))
                k = apply_rope(k, rope_angles(k.shape[2], self.d_k, start=start).to(k.device))
            if past is not None:  # cache: the earlier positions' keys and values come first
                k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        if cache is not None:
            cache.kv[self] = (k, v)  # kept for the next step
        check_mask(mask, q.shape[0], q.shape[2], k.shape[2], "MultiHeadAttention", self.num_heads)
        out, weights = self.attend(q, k, v, mask, self.dropout)
        self.attention_weights = weights.detach()  # (B, h, Lq, Lk)
        return self.w_o(merge_heads(out))  # (B, Lq, d_model)
