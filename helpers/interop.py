"""The exit ramp: convert our modules into PyTorch's own, with the same weights (notebooks 05-08).

PyTorch's boolean attention masks mean **True = blocked**, the opposite of this course's
convention; :func:`torch_attn_mask` and :func:`torch_key_padding_mask` convert.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from .checks import check_mask, check_sizes, check_tensor, describe

if TYPE_CHECKING:  # annotations only: to_torch dispatches on the class name, so notebook 03's
    # MultiHeadAttention converts without importing layers.py, which notebook 04 teaches
    from .attention import MultiHeadAttention
    from .layers import LayerNorm


def _mha(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    bias = ours.w_q.bias is not None
    theirs = nn.MultiheadAttention(ours.d_model, ours.num_heads, dropout=ours.dropout.p,
                                   bias=bias, batch_first=True)
    with torch.no_grad():
        # torch keeps W_Q, W_K and W_V stacked in one (3 d_model, d_model) matrix
        theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        theirs.out_proj.weight.copy_(ours.w_o.weight)
        if bias:
            theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
            theirs.out_proj.bias.copy_(ours.w_o.bias)
    return theirs


def _layer_norm(ours: LayerNorm) -> nn.LayerNorm:
    theirs = nn.LayerNorm(ours.weight.shape[0], eps=ours.eps)
    theirs.load_state_dict(ours.state_dict())
    return theirs


def _layer(ours):
    decoder = hasattr(ours, "cross_attn")  # nn.TransformerDecoderLayer, else EncoderLayer
    layer_cls = nn.TransformerDecoderLayer if decoder else nn.TransformerEncoderLayer
    relu = ours.feed_forward.activation == "relu"  # torch.nn takes "relu", or a function
    theirs = layer_cls(d_model=ours.self_attn.d_model, nhead=ours.self_attn.num_heads,
                       dim_feedforward=ours.feed_forward.linear1.out_features,
                       dropout=ours.dropout1.p, activation="relu" if relu else nn.functional.silu,
                       layer_norm_eps=ours.norm1.eps, batch_first=True, norm_first=ours.norm_first)
    theirs.linear1.load_state_dict(ours.feed_forward.linear1.state_dict())
    theirs.linear2.load_state_dict(ours.feed_forward.linear2.state_dict())
    for name in ("norm1", "norm2", "norm3"):
        if hasattr(theirs, name):
            getattr(theirs, name).load_state_dict(getattr(ours, name).state_dict())
    theirs.self_attn = _mha(ours.self_attn)
    if decoder:
        theirs.multihead_attn = _mha(ours.cross_attn)
    return theirs


def _stack(ours, stack_cls, **kwargs):
    theirs = stack_cls(_layer(ours.layers[0]), len(ours.layers),
                       norm=None if ours.norm is None else _layer_norm(ours.norm), **kwargs)
    theirs.layers = nn.ModuleList(_layer(layer) for layer in ours.layers)
    return theirs


_CONVERTERS = {
    "MultiHeadAttention": _mha,
    "LayerNorm": _layer_norm,
    "EncoderLayer": _layer,
    "DecoderLayer": _layer,
    # the nested-tensor fast path would return zeros at padded positions: keep it off
    "Encoder": lambda ours: _stack(ours, nn.TransformerEncoder, enable_nested_tensor=False),
    "Decoder": lambda ours: _stack(ours, nn.TransformerDecoder),
}


def to_torch(module: nn.Module) -> nn.Module:
    """The ``torch.nn`` module equal to ``module`` (one of ``_CONVERTERS``, from ``helpers`` or
    a notebook's class of the same name): same weights, same train/eval mode."""
    for cls in type(module).__mro__:  # by name, so a notebook's own class converts as well
        if cls.__name__ in _CONVERTERS and isinstance(module, nn.Module):
            theirs = _CONVERTERS[cls.__name__](module)
            p = next(module.parameters())
            return theirs.to(p.device, p.dtype).train(module.training)  # float64 stays float64
    raise TypeError("to_torch converts MultiHeadAttention, LayerNorm, EncoderLayer, DecoderLayer, "
                    f"Encoder or Decoder, got {type(module).__name__}")


def torch_attn_mask(mask: torch.Tensor, batch_size: int, num_heads: int,
                    query_len: int = None) -> torch.Tensor:
    """Our mask (True = may attend, broadcastable to ``(B, h, Lq, Lk)``) as torch's inverted
    ``attn_mask``: ``(Lq, Lk)`` if shared by the batch and the heads, else ``(B * h, Lq, Lk)``.
    ``query_len``: for a mask with a broadcast query axis, as a padding mask ``(B, 1, 1, Lk)``."""
    check_sizes("torch_attn_mask", batch_size=batch_size, num_heads=num_heads)
    if not torch.is_tensor(mask) or mask.dim() != 4:
        raise ValueError("torch_attn_mask: expected our mask with 4 axes (B or 1, h or 1, Lq, "
                         f"Lk), got {describe(mask)}")
    Lq = mask.shape[-2] if query_len is None else query_len
    Lk = mask.shape[-1]
    check_mask(mask, batch_size, Lq, Lk, "torch_attn_mask", num_heads)
    if mask.shape[:2] == (1, 1):
        return ~mask[0, 0].expand(Lq, Lk)  # (1, 1, Lq, Lk) -> (Lq, Lk), shared by the batch
    full = mask.expand(batch_size, num_heads, Lq, Lk)  # (B, h, Lq, Lk)
    return ~full.reshape(batch_size * num_heads, Lq, Lk)  # (B, h, Lq, Lk) -> (B*h, Lq, Lk)


def torch_key_padding_mask(mask: torch.Tensor) -> torch.Tensor:
    """Our padding mask ``(B, 1, 1, L)`` (True = real token) as torch's ``(B, L)`` (True = pad)."""
    check_tensor(mask, "torch_key_padding_mask: mask", "(B, 1, 1, L)", torch.bool)
    return ~mask[:, 0, 0, :]  # (B, 1, 1, L) -> (B, L)
