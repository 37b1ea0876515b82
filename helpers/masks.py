"""Look-ahead (causal) and padding masks. Taught in notebook 06.

Convention of the whole course: a boolean mask is **True where a query may attend to a key**,
as in ``F.scaled_dot_product_attention``. ``nn.MultiheadAttention`` and ``nn.Transformer*``
use the opposite convention (True = blocked); ``helpers.interop`` converts at that boundary.
"""

import torch


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
