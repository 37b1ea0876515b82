"""The whole encoder-decoder Transformer (Figure 1 of the paper). Taught in notebook 08."""

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from .checks import check_memory, check_same_batch, check_sizes, check_token_ids, ids_in_vocabulary
from .layers import Decoder, Encoder
from .masks import causal_mask
from .positional import PositionalEncoding


@dataclass
class TransformerConfig:
    """The sizes of a :class:`Transformer`, in one place. The defaults are the paper's base model
    (Table 3); :meth:`small` is the course's model, which trains on a laptop CPU in a minute."""

    d_model: int = 512          # width of every token vector
    num_heads: int = 8          # h, attention heads per layer; d_k = d_model / h
    num_layers: int = 6         # N, encoder layers, and as many decoder layers
    d_ff: int = 2048            # hidden width of the feed-forward network
    dropout: float = 0.1        # P_drop on sub-layers, embeddings and attention
    max_len: int = 5000         # longest sequence the positional encoding table covers
    norm_first: bool = False    # False: post-norm as in the paper; True: pre-norm
    tie_weights: bool = False   # share the target embedding and the output projection
    activation: str = "relu"    # of the feed-forward network: "relu", or "silu" (notebook 15)
    interleaved_positions: bool = True  # sin/cos columns alternate; False: in halves (15)

    @classmethod
    def small(cls) -> "TransformerConfig":
        """About 0.3 M parameters: 2 + 2 layers of width 64, enough for the course's corpus."""
        return cls(d_model=64, num_heads=4, num_layers=2, d_ff=256, dropout=0.1)


PAPER = TransformerConfig()  # the defaults of Transformer's arguments


def init_weights(model: nn.Module) -> None:
    """Embeddings ``N(0, 1/d_model)``, every other matrix Xavier-uniform (notebook 08, part 3)."""
    for embedding in (model.src_embed, model.tgt_embed):
        nn.init.normal_(embedding.weight, mean=0.0, std=model.d_model ** -0.5)
    for name, p in model.named_parameters():
        if p.dim() > 1 and "embed" not in name:
            nn.init.xavier_uniform_(p)


class Transformer(nn.Module):
    """Embeddings + positions -> encoder -> decoder -> projection to the target vocabulary. The
    modules are named as in notebook 08's ``ModuleDict``; with ``tie_weights`` one matrix is the
    target embedding and the output projection (section 3.4 of the paper)."""

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_model=PAPER.d_model,
                 num_heads=PAPER.num_heads, num_layers=PAPER.num_layers, d_ff=PAPER.d_ff,
                 dropout=PAPER.dropout, max_len=PAPER.max_len, norm_first=PAPER.norm_first,
                 tie_weights=PAPER.tie_weights, activation=PAPER.activation,
                 interleaved_positions=PAPER.interleaved_positions):
        super().__init__()
        check_sizes("Transformer", src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                    d_model=d_model, num_heads=num_heads, num_layers=num_layers, d_ff=d_ff,
                    max_len=max_len)  # whole numbers >= 1, or a clear error
        self.d_model = d_model
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        self.positional = PositionalEncoding(  # shared, no parameters
            d_model, max_len, dropout, interleaved=interleaved_positions)
        stack = (num_layers, d_model, num_heads, d_ff, dropout, norm_first, activation)
        self.encoder, self.decoder = Encoder(*stack), Decoder(*stack)  # the same sizes
        self.generator = nn.Linear(d_model, tgt_vocab_size)  # the output projection
        init_weights(self)
        if tie_weights:  # one matrix, two uses (section 3.4)
            self.generator.weight = self.tgt_embed.weight

    def embed(self, embedding: nn.Embedding, tokens: torch.Tensor, name: str,
              start: int = 0) -> torch.Tensor:
        """Token ids ``(B, L)`` at positions ``start ...`` -> ``embedding(tokens) *
        sqrt(d_model)`` plus positions."""
        check_token_ids(tokens, name)
        with ids_in_vocabulary(tokens, embedding.num_embeddings, name):
            x = embedding(tokens)  # (B, L) -> (B, L, d_model)
        return self.positional(x * math.sqrt(self.d_model), start)  # tokens scaled, not PE

    def encode(self, src: torch.Tensor, src_mask=None) -> torch.Tensor:
        """``src (B, S)`` token ids -> memory ``(B, S, d_model)``."""
        return self.encoder(self.embed(self.src_embed, src, "src"), src_mask)

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None, cache=None) -> torch.Tensor:
        """``tgt (B, T)`` ids, ``memory (B, S, d_model)`` -> logits ``(B, T, V)``; None: causal.
        ``cache``: a ``KVCache`` (notebook 10); ``tgt`` then holds only the new tokens, at
        positions ``cache.length ...``, and the earlier ones' keys and values are in it."""
        start = 0 if cache is None else cache.length  # the positions already in the cache
        x = self.embed(self.tgt_embed, tgt, "tgt", start)
        check_memory(memory, tgt.shape[0])
        if cache is not None:
            cache.check_memory(memory)  # the memory its cross-attention keys came from
        if tgt_mask is None:  # (1, 1, T, start + T): the causal mask's last T rows
            t = start + tgt.shape[1]  # 4 axes, so it cannot pass for a (B, T) padding mask
            tgt_mask = causal_mask(t, device=tgt.device)[None, None, start:]
        out = self.generator(self.decoder(x, memory, tgt_mask, src_mask, cache))  # (B, T, V)
        if cache is not None:
            cache.length += tgt.shape[1]
        return out

    def forward(self, src, tgt, src_mask=None, tgt_mask=None) -> torch.Tensor:
        """Teacher forcing: ``src (B, S)``, ``tgt (B, T)`` shifted right -> ``(B, T, V)``."""
        check_same_batch(src, tgt)
        return self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)


def build_model(config: TransformerConfig, src_vocab_size: int, tgt_vocab_size: int) -> Transformer:
    """A fresh :class:`Transformer` with the sizes of ``config``."""
    return Transformer(src_vocab_size, tgt_vocab_size, **asdict(config))
