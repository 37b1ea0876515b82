"""A decoder-only Transformer (a GPT) made of the course's own pieces. Taught in notebook 12.

A block is notebook 05's encoder layer under a causal mask; :class:`GPTConfig` chooses its norm,
feed-forward network and positions. Shapes: ``B`` batch, ``L`` length, ``V`` vocabulary.
"""

import math
from dataclasses import dataclass

import torch
from torch import nn

from .attention import MultiHeadAttention
from .checks import check_sizes, check_tensor, ids_in_vocabulary
from .layers import FeedForward, LayerNorm, RMSNorm, SwiGLU, layer_stack, residual_sublayer
from .masks import causal_mask
from .positional import PositionalEncoding

GPT_CHOICES = {  # what GPTConfig may choose for each part: notebook 05's first, then section 7's
    "norm": ("layer", "rms"),
    "ffn": ("relu", "swiglu"),
    # added (as in 2017), an embedding per position, or rotary (inside attention)
    "positions": ("sinusoidal", "learned", "rope"),
}


@dataclass
class GPTConfig:
    """A decoder-only model: its sizes, and one of ``GPT_CHOICES`` for each of its parts."""

    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 4
    d_ff: int = 256
    dropout: float = 0.1
    max_len: int = 64
    norm_first: bool = True
    norm: str = "layer"
    ffn: str = "relu"
    positions: str = "sinusoidal"

    def __post_init__(self):
        for name, allowed in GPT_CHOICES.items():
            if (value := getattr(self, name)) not in allowed:
                raise ValueError(f"GPTConfig.{name} must be one of {allowed}, got {value!r}")

    @classmethod
    def modern(cls, **changes) -> "GPTConfig":
        """Pre-norm, RMSNorm, SwiGLU and rotary positions, as in Llama-style models."""
        return cls(**{"norm": "rms", "ffn": "swiglu", "positions": "rope", **changes})


class Block(nn.Module):
    """A GPT block from ``config``: self-attention and feed-forward, each via residual_sublayer."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        c, norm = config, (RMSNorm if config.norm == "rms" else LayerNorm)
        self.self_attn = MultiHeadAttention(c.d_model, c.num_heads, c.dropout,
                                            rope=c.positions == "rope")
        self.feed_forward = (  # SwiGLU: 3 matrices of 2/3 d_ff, the ReLU network's size
            SwiGLU(c.d_model, 2 * c.d_ff // 3, c.dropout) if c.ffn == "swiglu"
            else FeedForward(c.d_model, c.d_ff, c.dropout))
        self.norm_first, self.norm1, self.norm2 = c.norm_first, norm(c.d_model), norm(c.d_model)
        self.dropout1, self.dropout2 = nn.Dropout(c.dropout), nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor, mask=None, cache=None) -> torch.Tensor:
        """``x (B, L, d_model)``, the new positions only with a ``KVCache`` as ``cache``."""
        def self_attention(y):
            return self.dropout1(self.self_attn(y, y, y, mask, cache))

        def feed_forward(y):
            return self.dropout2(self.feed_forward(y))

        x = residual_sublayer(x, self_attention, self.norm1, self.norm_first)
        return residual_sublayer(x, feed_forward, self.norm2, self.norm_first)


class GPT(nn.Module):
    """Token embeddings (+ positions) -> N causal blocks -> (final norm) -> vocabulary logits."""

    def __init__(self, vocab_size: int, config: GPTConfig):
        super().__init__()
        check_sizes("GPT", vocab_size=vocab_size, max_len=config.max_len)
        self.config = config
        self.embed = nn.Embedding(vocab_size, config.d_model)
        if config.positions == "sinusoidal":  # adds the table, then dropout
            self.positional = PositionalEncoding(config.d_model, config.max_len, config.dropout)
        else:  # learned positions are added in embed_tokens; rotary ones enter attention
            self.dropout = nn.Dropout(config.dropout)
        if config.positions == "learned":
            self.position_embed = nn.Embedding(config.max_len, config.d_model)
        self.blocks = layer_stack(lambda: Block(config), config.num_layers)
        norm = RMSNorm if config.norm == "rms" else LayerNorm
        self.final_norm = norm(config.d_model) if config.norm_first else nn.Identity()
        self.head = nn.Linear(config.d_model, vocab_size)
        nn.init.normal_(self.embed.weight, std=config.d_model ** -0.5)
        self.head.weight = self.embed.weight  # tied, as notebook 08's target embedding

    def embed_tokens(self, tokens: torch.Tensor, start: int = 0) -> torch.Tensor:
        """``tokens (B, L)`` at positions ``start ...`` -> ``(B, L, d_model)``: the embeddings
        scaled by sqrt(d_model), with the positions (none here for rope: they enter attention)."""
        check_tensor(tokens, "GPT: tokens", "(B, L)", (torch.long, torch.int))
        L, c = tokens.shape[1], self.config
        if start + L > c.max_len:
            raise ValueError(f"GPT: position {start + L - 1} is beyond max_len={c.max_len}")
        with ids_in_vocabulary(tokens, self.embed.num_embeddings, "GPT: tokens"):
            x = self.embed(tokens) * math.sqrt(c.d_model)
        if c.positions == "sinusoidal":
            return self.positional(x, start)  # adds the table's rows start ... start + L - 1
        if c.positions == "learned":
            x = x + self.position_embed(torch.arange(start, start + L, device=tokens.device))
        return self.dropout(x)

    def forward(self, tokens: torch.Tensor, mask=None, cache=None) -> torch.Tensor:
        """``tokens (B, L)`` -> logits ``(B, L, V)``. ``mask``: True = may attend, ``(B, 1, L,
        L)`` (causal and padding, as ``continuation_batch`` makes it); None: causal. ``cache``:
        a ``KVCache``; ``tokens`` then holds only the new tokens, at positions
        ``cache.length ...``, and ``mask`` (if given) covers every key."""
        start = 0 if cache is None else cache.length  # the positions already in the cache
        x = self.embed_tokens(tokens, start)  # (B, L, d_model)
        if mask is None:  # (1, 1, L, start + L): the causal mask's last L rows
            mask = causal_mask(start + tokens.shape[1], device=tokens.device)[None, None, start:]
        for block in self.blocks:
            x = block(x, mask, cache)
        if cache is not None:
            cache.length += tokens.shape[1]
        return self.head(self.final_norm(x))  # (B, L, d_model) -> (B, L, V)
