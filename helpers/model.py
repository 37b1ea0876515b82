"""The whole encoder-decoder Transformer (Figure 1 of the paper). Taught in notebook 08."""

import math

import torch
from torch import nn

from .attention import TOKEN_DTYPES, check_sizes, check_tensor
from .layers import Decoder, Encoder
from .masks import causal_mask
from .positional import PositionalEncoding


class Transformer(nn.Module):
    """Embeddings + positions -> encoder -> decoder -> linear projection to the target vocabulary.

    **Why embeddings are multiplied by sqrt(d_model)** (section 3.4). The positional encoding is
    added to the token embedding, and its entries are sines and cosines of size about 1 (root
    mean square 1/sqrt(2)). The embeddings here start as ``N(0, 1/d_model)`` (the scale that
    suits an embedding matrix shared with the output projection, whose logits should start
    small), so each entry is about ``1/sqrt(d_model)``: tiny next to the positions, and the
    model would at first hardly see which token is where. Multiplying by ``sqrt(d_model)`` puts
    every entry back on the scale of 1, the same as the positional encoding, so neither drowns
    the other. (With ``nn.Embedding``'s own ``N(0, 1)`` start the factor would instead make the
    tokens ``sqrt(d_model)`` times louder than the positions: the scale and the initialisation
    go together.)

    ``tie_weights=True`` shares one matrix between the target embedding and the output
    projection, as the paper does.
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_model: int = 512,
                 num_heads: int = 8, num_layers: int = 6, d_ff: int = 2048,
                 dropout: float = 0.1, max_len: int = 5000, norm_first: bool = False,
                 tie_weights: bool = False):
        super().__init__()
        check_sizes("Transformer", src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                    d_model=d_model, num_heads=num_heads, num_layers=num_layers, d_ff=d_ff,
                    max_len=max_len)  # whole numbers >= 1, or a clear error
        self.d_model = d_model
        self.src_vocab_size = src_vocab_size
        self.tgt_vocab_size = tgt_vocab_size
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout, norm_first)
        self.decoder = Decoder(num_layers, d_model, num_heads, d_ff, dropout, norm_first)
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        self._init_weights()
        if tie_weights:
            self.generator.weight = self.tgt_embed.weight

    def _init_weights(self):
        for embedding in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embedding.weight, mean=0.0, std=self.d_model ** -0.5)
        for name, p in self.named_parameters():
            if p.dim() > 1 and "embed" not in name:
                nn.init.xavier_uniform_(p)

    def _embed(self, embedding: nn.Embedding, tokens: torch.Tensor, name: str, start: int = 0):
        check_tensor(tokens, f"Transformer: {name} (token ids)", "(B, L)", TOKEN_DTYPES)
        if tokens.min() < 0 or tokens.max() >= embedding.num_embeddings:
            raise ValueError(
                f"{name} holds token ids from {int(tokens.min())} to {int(tokens.max())}, but "
                f"the vocabulary has ids 0..{embedding.num_embeddings - 1}"
            )
        x = embedding(tokens) * math.sqrt(self.d_model)  # (B, L, d_model)
        return self.positional(x, start)

    def encode(self, src: torch.Tensor, src_mask=None) -> torch.Tensor:
        """``src (B, S)`` token ids -> memory ``(B, S, d_model)``."""
        return self.encoder(self._embed(self.src_embed, src, "src"), src_mask)

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None, cache=None) -> torch.Tensor:
        """``tgt (B, T)`` token ids and ``memory (B, S, d_model)`` -> logits ``(B, T, V)``.

        ``tgt_mask=None`` means the causal mask alone; a given ``tgt_mask`` is used as it is.
        With a ``cache`` from :meth:`new_cache`, ``tgt`` holds only the new tokens.
        """
        start = 0 if cache is None else cache["length"]
        x = self._embed(self.tgt_embed, tgt, "tgt", start)
        T = tgt.shape[1]
        if memory.dim() != 3 or memory.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"memory must be (B, S, d_model) with the batch size of tgt ({tgt.shape[0]}), "
                f"got {tuple(memory.shape)}"
            )
        if tgt_mask is None:
            # (1, 1, T, start + T): the new tokens see every cached one and the causal part of
            # the rest; 4 axes, so that it cannot be mistaken for a (B, T) padding mask
            tgt_mask = causal_mask(start + T, device=tgt.device)[None, None, start:]
        layers_cache = None if cache is None else cache["layers"]
        x = self.decoder(x, memory, tgt_mask, src_mask, layers_cache)
        if cache is not None:
            cache["length"] += T
        return self.generator(x)  # (B, T, V)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None) -> torch.Tensor:
        """Teacher forcing: ``src (B, S)`` and ``tgt (B, T)`` (shifted right, BOS first) -> logits
        ``(B, T, V)``."""
        if src.dim() == 2 and tgt.dim() == 2 and src.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"src and tgt must have the same batch size, got {src.shape[0]} and {tgt.shape[0]}"
            )
        return self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)

    def new_cache(self) -> dict:
        """An empty KV cache for incremental decoding (notebook 10)."""
        return {"length": 0, "layers": self.decoder.new_cache()}
