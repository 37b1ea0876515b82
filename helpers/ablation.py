"""Removing attention heads from a trained model, to measure which ones it needs (an ablation).
Taught in notebook 11. Shapes: ``B`` batch, ``L`` positions, ``h`` heads of ``d_k`` features.
"""

import contextlib

import torch


def zero_head(merged: torch.Tensor, head: int, num_heads: int) -> torch.Tensor:
    """``merged (B, L, d_model)``, the heads side by side as ``merge_heads`` leaves them (the
    input of ``w_o``) -> a copy with the ``d_k`` features of head ``head`` set to 0."""
    d_k = merged.shape[-1] // num_heads  # head i owns features i * d_k ... (i + 1) * d_k - 1
    out = merged.clone()
    out[..., head * d_k:(head + 1) * d_k] = 0
    return out


@contextlib.contextmanager
def ablated(attention, heads):
    """Inside the with-block, the ``MultiHeadAttention`` ``attention`` runs without ``heads``:
    a forward pre-hook on its output projection ``w_o`` zeroes their features."""
    def remove(module, inputs):  # a forward pre-hook: it replaces the input of w_o
        merged = inputs[0]
        for head in heads:
            merged = zero_head(merged, head, attention.num_heads)
        return (merged,)
    handle = attention.w_o.register_forward_pre_hook(remove)
    try:
        yield
    finally:
        handle.remove()  # the model is intact again, even if the block raised
