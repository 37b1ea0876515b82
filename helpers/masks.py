"""Look-ahead (causal) and padding masks. Taught in notebook 06, with an explorer of both.

A boolean mask is **True where a query may attend to a key**, as in
``F.scaled_dot_product_attention`` (``nn.MultiheadAttention``'s is inverted: ``helpers.interop``).
"""

import torch

from .attention import scaled_dot_product_attention

EXPLORER_MAX_LEN = 16  # the longest sequence of the mask explorer


def causal_mask(size: int, device=None) -> torch.Tensor:
    """``(size, size)`` bool mask, True on and below the diagonal: position t sees 0..t."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError(f"causal_mask expects a positive int size, got {size!r}")
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """``(B, 1, 1, L)`` bool mask, True where ``tokens`` is a real token (not ``pad_id``).

    The two singleton axes broadcast over heads and queries: every query may look at every
    real key, and no query looks at a padded key.
    """
    if not torch.is_tensor(tokens) or tokens.dim() != 2:
        shape = tuple(tokens.shape) if torch.is_tensor(tokens) else type(tokens).__name__
        raise ValueError(f"padding_mask expects token ids of shape (B, L), got {shape}")
    return (tokens != pad_id)[:, None, None, :]  # (B, L) -> (B, 1, 1, L)


def mask_explorer_data(seq_len, pad_len, causal, seed=0, d_k=8):
    """Notebook 06's mask explorer: one sequence of ``seq_len`` tokens, its last ``pad_len``
    padding (clamped), with or without the look-ahead mask -> its "mask", the attention
    "weights" of seeded random vectors, "pad_len", "clamped" and "labels"."""
    if not 1 <= seq_len <= EXPLORER_MAX_LEN:
        raise ValueError(f"seq_len must be between 1 and {EXPLORER_MAX_LEN}, got {seq_len}")
    if pad_len < 0:
        raise ValueError(f"pad_len cannot be negative, got {pad_len}")
    clamped = pad_len > seq_len
    pad_len = min(pad_len, seq_len)
    generator = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, EXPLORER_MAX_LEN, d_k, generator=generator)[:, :seq_len]
    tokens = torch.ones(1, seq_len, dtype=torch.long)  # token id 1 for real tokens, 0 for pads
    tokens[:, seq_len - pad_len:] = 0
    mask = padding_mask(tokens, pad_id=0)[0, 0]  # (1, L): hides padded keys from every query
    if causal:
        mask = causal_mask(seq_len) & mask  # (L, L) & (1, L) -> (L, L)
    mask = mask.expand(seq_len, seq_len)
    _, weights = scaled_dot_product_attention(q, k, k, mask)
    labels = [f"t{i}" for i in range(seq_len - pad_len)] + ["<pad>"] * pad_len
    return {"mask": mask.numpy().copy(), "weights": weights.numpy(), "pad_len": pad_len,
            "clamped": clamped, "labels": labels}
