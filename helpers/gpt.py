"""A decoder-only Transformer (a GPT) made of the course's own pieces, translation by
continuation, sampling, and the modern block. Taught in notebook 12.

A GPT block is notebook 05's ``EncoderLayer`` (self-attention and feed-forward, each with its
residual path and norm) given notebook 06's causal mask: no encoder, no cross-attention. The
translator becomes one sequence, ``<bos> the cat eats <sep> le chat mange <eos>``, and the model
learns to continue it; the loss counts the French part only (``labels`` is ``PAD_ID`` elsewhere).

The modern block swaps three parts of the 2017 one: ``RMSNorm`` for LayerNorm, ``SwiGLU`` for
the ReLU feed-forward, rotary position embeddings (``RotaryAttention``) for added sinusoids;
and it normalises before each sub-layer (pre-norm). Shapes: ``B`` batch, ``L`` length, ``V``
vocabulary, ``h`` heads, ``d_k`` head size."""

import dataclasses
import math
import random
import time
from dataclasses import dataclass

import torch
from torch import nn

from .attention import MultiHeadAttention, merge_heads, scaled_dot_product_attention, split_heads
from .checks import check_sizes, check_tensor
from .data import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, Vocab, pad
from .layers import EncoderLayer, LayerNorm, layer_stack
from .masks import causal_mask, padding_mask
from .positional import PositionalEncoding
from .training import count_parameters, label_smoothed_nll, make_optimizer, train
from .translation import exact_match
from .utils import set_seed

SEP = "<sep>"  # between the English sentence and its French continuation


# ---- The modern block's parts ----------------------------------------------------------------

def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last axis: notebook 04's LayerNorm
    without subtracting the mean and without the bias (Zhang and Sennrich, 2019)."""
    rms = x.pow(2).mean(dim=-1, keepdim=True).add(eps).sqrt()  # (..., 1): no mean removed
    return x / rms * weight


class RMSNorm(nn.Module):
    """:func:`rms_norm` with a learned gain per feature, as ``torch.nn.RMSNorm``."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


class SwiGLU(nn.Module):
    """``(silu(x W1) * (x W3)) W2``: a gated feed-forward network (Shazeer, 2020)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)  # the gate
        self.w3 = nn.Linear(d_model, d_ff, bias=False)  # the value it lets through
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.dropout(nn.functional.silu(self.w1(x)) * self.w3(x)))


def rope_angles(length: int, d_k: int, base: float = 10000.0, start: int = 0) -> torch.Tensor:
    """``(length, d_k / 2)`` angles ``p * base^(-2i/d_k)`` of positions ``start ...``: notebook
    02's frequencies, one per pair of features ``(2i, 2i + 1)``."""
    freqs = base ** (-torch.arange(0, d_k, 2, dtype=torch.float32) / d_k)  # (d_k / 2,)
    positions = torch.arange(start, start + length, dtype=torch.float32)  # (length,)
    return positions[:, None] * freqs[None, :]


def apply_rope(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate each feature pair ``(x[2i], x[2i+1])`` of ``x (..., L, d_k)`` by its angle
    (``angles (L, d_k / 2)``). Then ``rope(q, p) . rope(k, p')`` depends on ``p - p'`` only."""
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., L, d_k / 2) each: the two halves of each pair
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
    return rotated.flatten(-2)  # (..., L, d_k / 2, 2) -> (..., L, d_k), pairs interleaved again


class RotaryAttention(MultiHeadAttention):
    """Notebook 03's multi-head attention with the queries and keys rotated by their position.

    ``start`` is the position of the first query (for the KV cache); keys are at
    ``0 ... Lk - 1`` when they are the queries' own sequence, as in self-attention.
    """

    def forward(self, query, key, value, mask=None, start: int = 0):
        q = split_heads(self.w_q(query), self.num_heads)  # (B, h, Lq, d_k)
        k = split_heads(self.w_k(key), self.num_heads)  # (B, h, Lk, d_k)
        v = split_heads(self.w_v(value), self.num_heads)
        q = apply_rope(q, rope_angles(q.shape[2], self.d_k, start=start).to(q.device))
        k = apply_rope(k, rope_angles(k.shape[2], self.d_k, start=start).to(k.device))
        out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout)
        self.attention_weights = weights.detach()
        return self.w_o(merge_heads(out))  # (B, Lq, d_model)


# ---- The model ----------------------------------------------------------------------------------

@dataclass
class GPTConfig:
    """A decoder-only model. ``norm``: "layer" or "rms"; ``ffn``: "relu" or "swiglu";
    ``positions``: "sinusoidal" (added, as in 2017), "learned" (an embedding per position) or
    "rope" (rotary, inside attention)."""

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

    @classmethod
    def modern(cls, **changes) -> "GPTConfig":
        """Pre-norm, RMSNorm, SwiGLU and rotary positions, as in Llama-style models."""
        return cls(**{"norm": "rms", "ffn": "swiglu", "positions": "rope", **changes})


def gpt_block(config: GPTConfig) -> EncoderLayer:
    """Notebook 05's encoder layer, with the parts ``config`` asks for swapped in."""
    c = config
    block = EncoderLayer(c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first)
    if c.norm == "rms":
        block.norm1, block.norm2 = RMSNorm(c.d_model), RMSNorm(c.d_model)
    if c.ffn == "swiglu":  # 2/3 of d_ff per matrix: three matrices, the ReLU network's parameters
        block.feed_forward = SwiGLU(c.d_model, 2 * c.d_ff // 3, c.dropout)
    if c.positions == "rope":
        block.self_attn = RotaryAttention(c.d_model, c.num_heads, c.dropout)
    return block


class GPT(nn.Module):
    """Token embeddings (+ positions) -> N causal blocks -> (final norm) -> vocabulary logits."""

    def __init__(self, vocab_size: int, config: GPTConfig):
        super().__init__()
        choices = {"norm": ("layer", "rms"), "ffn": ("relu", "swiglu"),
                   "positions": ("sinusoidal", "learned", "rope")}
        for name, allowed in choices.items():
            if getattr(config, name) not in allowed:
                raise ValueError(f"GPTConfig.{name} must be one of {allowed}, got "
                                 f"{getattr(config, name)!r}")
        check_sizes("GPT", vocab_size=vocab_size, max_len=config.max_len)
        self.config, self.vocab_size = config, vocab_size
        self.embed = nn.Embedding(vocab_size, config.d_model)
        self.positional = PositionalEncoding(config.d_model, config.max_len, config.dropout)
        if config.positions == "learned":
            self.position_embed = nn.Embedding(config.max_len, config.d_model)
        self.blocks = layer_stack(lambda: gpt_block(config), config.num_layers)
        norm = RMSNorm if config.norm == "rms" else LayerNorm
        self.final_norm = norm(config.d_model) if config.norm_first else nn.Identity()
        self.head = nn.Linear(config.d_model, vocab_size)
        nn.init.normal_(self.embed.weight, std=config.d_model ** -0.5)
        self.head.weight = self.embed.weight  # tied, as notebook 08's target embedding

    def embed_tokens(self, tokens: torch.Tensor, start: int = 0) -> torch.Tensor:
        """``tokens (B, L)`` at positions ``start ...`` -> ``(B, L, d_model)``."""
        check_tensor(tokens, "GPT: tokens", "(B, L)", (torch.long, torch.int))
        L, c = tokens.shape[1], self.config
        if start + L > c.max_len:
            raise ValueError(f"GPT: position {start + L - 1} is beyond max_len={c.max_len}")
        x = self.embed(tokens) * math.sqrt(c.d_model)
        if c.positions == "sinusoidal":
            return self.positional(x, start)
        if c.positions == "learned":
            x = x + self.position_embed(torch.arange(start, start + L, device=tokens.device))
        return self.positional.dropout(x)  # rope: positions enter inside attention

    def forward(self, tokens: torch.Tensor, mask=None) -> torch.Tensor:
        """``tokens (B, L)`` -> logits ``(B, L, V)``; ``mask`` defaults to the causal mask."""
        x = self.embed_tokens(tokens)
        if mask is None:
            mask = causal_mask(tokens.shape[1], device=tokens.device)[None, None]  # (1,1,L,L)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.final_norm(x))


# ---- Translation by continuation -------------------------------------------------------------

def joint_vocab(src_vocab: Vocab, tgt_vocab: Vocab) -> Vocab:
    """One vocabulary for both languages: the specials, ``<sep>``, English, then French words
    (a word both languages write the same way, such as "a", is one token)."""
    english = src_vocab.tokens[len(SPECIAL_TOKENS):]
    french = [w for w in tgt_vocab.tokens[len(SPECIAL_TOKENS):] if w not in set(english)]
    return Vocab([*SPECIAL_TOKENS, SEP, *english, *french])


@dataclass
class ContinuationBatch:
    tokens: torch.Tensor  # (B, L) <bos> english <sep> french, padded
    labels: torch.Tensor  # (B, L) the next token where it is French or <eos>, else PAD_ID
    mask: torch.Tensor  # (B, 1, L, L) causal and padding, True = may attend

    def to(self, device) -> "ContinuationBatch":
        return ContinuationBatch(self.tokens.to(device), self.labels.to(device),
                                 self.mask.to(device))


def continuation_batch(pairs: list, vocab: Vocab) -> ContinuationBatch:
    """``(english, french)`` strings -> the model's input and labels, loss on French only."""
    sep = vocab.ids[SEP]
    rows, labels = [], []
    for english, french in pairs:
        prompt = [BOS_ID, *vocab.encode(english), sep]
        answer = [*vocab.encode(french), EOS_ID]
        sequence = prompt + answer
        rows.append(sequence[:-1])  # input: every token but the last
        # label of position t is token t + 1: the prompt's tokens are not predicted (PAD_ID)
        labels.append([PAD_ID] * (len(prompt) - 1) + answer)
    tokens = pad(rows)
    mask = causal_mask(tokens.shape[1]) & padding_mask(tokens, PAD_ID)  # (B, 1, L, L)
    return ContinuationBatch(tokens, pad(labels), mask)


def prompt_ids(sentences: list, vocab: Vocab) -> list:
    """English strings -> ``<bos> english <sep>`` id lists, ready to be continued."""
    return [[BOS_ID, *vocab.encode(s), vocab.ids[SEP]] for s in sentences]


def continuation_loss(model: GPT, batch: ContinuationBatch, label_smoothing: float = 0.1):
    """Notebook 09's label-smoothed loss, on the French tokens (and ``<eos>``) only."""
    logits = model(batch.tokens, batch.mask)  # (B, L, V)
    return label_smoothed_nll(logits, batch.labels, label_smoothing, ignore_index=PAD_ID)


def continuation_batches(pairs: list, vocab: Vocab, batch_size: int, seed: int = 0):
    """Endless :class:`ContinuationBatch` es of ``pairs``, reshuffled every epoch (seeded); only
    full batches, so there must be at least ``batch_size`` pairs."""
    if not 1 <= batch_size <= len(pairs):  # no full batch: the loop would never yield
        raise ValueError(f"continuation_batches: batch_size={batch_size} needs between 1 and "
                         f"len(pairs) = {len(pairs)} pairs per batch")
    rng, order = random.Random(seed), list(range(len(pairs)))
    while True:
        rng.shuffle(order)
        for start in range(0, len(order) - batch_size + 1, batch_size):
            yield continuation_batch([pairs[i] for i in order[start:start + batch_size]], vocab)


def train_gpt(corpus, config: GPTConfig, steps: int = 600, batch_size: int = 128,
              warmup: int = 200, lr_scale: float = 1.0, seed: int = 0, progress: bool = True,
              max_seconds=None, on_step=None):
    """A fresh :class:`GPT` trained on ``corpus.train`` by continuation, as notebook 09 trains
    the encoder-decoder (Adam with the warm-up schedule, clipping at 1). Returns
    ``(model in eval mode, vocab, losses)``."""
    vocab = joint_vocab(corpus.src_vocab, corpus.tgt_vocab)
    set_seed(seed)
    model = GPT(len(vocab), config)
    optimizer, scheduler = make_optimizer(model, config.d_model, warmup, lr_scale)
    losses = train(model, continuation_batches(corpus.train, vocab, batch_size, seed),
                   continuation_loss, optimizer, scheduler, max_steps=steps,
                   max_seconds=max_seconds, progress=progress, on_step=on_step)
    return model.eval(), vocab, losses


# ---- Generation: greedy, sampling, the KV cache -----------------------------------------------

def filter_logits(logits: torch.Tensor, temperature: float = 1.0, top_k=None, top_p=None):
    """Next-token logits ``(B, V)`` divided by ``temperature``, then only the ``top_k`` largest
    kept, then only the smallest set of most likely tokens whose probabilities reach ``top_p``
    (the token that crosses ``top_p`` is kept); the others become ``-inf``."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 (use greedy decoding for 0), got {temperature}")
    logits = logits / temperature
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        ordered, index = logits.sort(dim=-1, descending=True)  # (B, V) most likely first
        probs = ordered.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # mass of the tokens ranked above each one
        drop = before >= top_p  # the tokens above already reach top_p: this one is not needed
        drop[..., 0] = False  # never empty: the most likely token stays (top_p = 0: greedy)
        ordered = ordered.masked_fill(drop, float("-inf"))
        logits = torch.empty_like(logits).scatter_(-1, index, ordered)  # back in vocab order
    return logits


def _cached_step(model: GPT, tokens: torch.Tensor, cache: list, start: int) -> torch.Tensor:
    """Logits ``(B, L, V)`` of ``tokens (B, L)`` at positions ``start ...``, given the keys and
    values of positions ``0 ... start - 1`` in ``cache`` (one ``(k, v)`` per block, extended)."""
    x = model.embed_tokens(tokens, start)
    for i, block in enumerate(model.blocks):
        attn = block.self_attn

        def attend(y, attn=attn, i=i):
            q, k, v = (split_heads(w(y), attn.num_heads) for w in (attn.w_q, attn.w_k, attn.w_v))
            if isinstance(attn, RotaryAttention):  # rotate by the absolute positions
                angles = rope_angles(q.shape[2], attn.d_k, start=start).to(q.device)
                q, k = apply_rope(q, angles), apply_rope(k, angles)
            if cache[i] is not None:
                k, v = torch.cat([cache[i][0], k], dim=2), torch.cat([cache[i][1], v], dim=2)
            cache[i] = (k, v)  # (B, h, start + L, d_k)
            T, t = q.shape[2], k.shape[2]
            mask = causal_mask(t, device=q.device)[None, None, t - T:]  # (1, 1, T, t): new rows
            return attn.w_o(merge_heads(scaled_dot_product_attention(q, k, v, mask)[0]))

        if block.norm_first:
            x = x + block.dropout1(attend(block.norm1(x)))
            x = x + block.dropout2(block.feed_forward(block.norm2(x)))
        else:
            x = block.norm1(x + block.dropout1(attend(x)))
            x = block.norm2(x + block.dropout2(block.feed_forward(x)))
    return model.head(model.final_norm(x))


@torch.no_grad()
def generate(model: GPT, prompts: list, max_new: int, temperature: float = 0.0, top_k=None,
             top_p=None, generator=None, use_cache: bool = True) -> list:
    """Continue each prompt (a list of ids) by at most ``max_new`` tokens, up to ``<eos>``.

    ``temperature=0``: greedy; otherwise sample from :func:`filter_logits` with ``generator``.
    Prompts of one length are continued together as a batch. Returns the new ids of each
    prompt (without ``<eos>``), in the order given.
    """
    check_sizes("generate", max_new=max_new)
    was_training, results = model.training, [None] * len(prompts)
    model.eval()
    by_length = {}
    for i, ids in enumerate(prompts):
        by_length.setdefault(len(ids), []).append(i)
    device = next(model.parameters()).device
    for length, rows in by_length.items():
        tokens = torch.tensor([prompts[i] for i in rows], device=device)  # (b, length)
        out, cache, done = tokens, [None] * len(model.blocks), None
        for _ in range(max_new):
            if use_cache:
                logits = _cached_step(model, tokens, cache, out.shape[1] - tokens.shape[1])
            else:
                logits = model(out)
            logits = logits[:, -1]  # (b, V): the last position predicts the next token
            if temperature == 0:
                new = logits.argmax(dim=-1)
            else:
                probs = filter_logits(logits, temperature, top_k, top_p).softmax(dim=-1)
                new = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            new = new if done is None else new.masked_fill(done, EOS_ID)  # finished: <eos>
            out, tokens = torch.cat([out, new[:, None]], dim=1), new[:, None]
            done = new == EOS_ID if done is None else done | (new == EOS_ID)
            if bool(done.all()) or out.shape[1] >= model.config.max_len:
                break
        for row, ids in zip(rows, out[:, length:].tolist(), strict=True):
            results[row] = ids[:ids.index(EOS_ID)] if EOS_ID in ids else ids
    model.train(was_training)
    return results


def continue_translations(model: GPT, sentences: list, vocab: Vocab, **options) -> list:
    """English strings -> the French the model writes after ``<sep>`` (greedy by default)."""
    outputs = generate(model, prompt_ids(sentences, vocab), options.pop("max_new", 20), **options)
    return [vocab.decode(ids) for ids in outputs]


# ---- The modern block, measured ----------------------------------------------------------------

# Each variant changes GPTConfig's defaults (pre-norm, LayerNorm, ReLU, sinusoidal positions).
VARIANTS = {
    "post-norm (2017)": {"norm_first": False},
    "pre-norm": {},
    "pre-norm + RMSNorm": {"norm": "rms"},
    "pre-norm + SwiGLU": {"ffn": "swiglu"},
    "pre-norm + learned positions": {"positions": "learned"},
    "pre-norm + RoPE": {"positions": "rope"},
    "modern: RMSNorm + SwiGLU + RoPE": {"norm": "rms", "ffn": "swiglu", "positions": "rope"},
}


def split_by_length(corpus, max_words: int):
    """``corpus`` trained on English sentences of at most ``max_words`` words and tested on
    the longer test sentences: can the model place words at positions it never saw?"""
    short = [p for p in corpus.train if len(p[0].split()) <= max_words]
    long = [p for p in corpus.test if len(p[0].split()) > max_words]
    return dataclasses.replace(corpus, train=short, test=long)


def ablation(corpus, variants: dict = VARIANTS, seeds=(0, 1, 2), steps: int = 300,
             batch_size: int = 64, **config) -> list:
    """Train every variant with every seed; one row each: ``final_loss`` (the mean loss of the
    last 20 steps, or of all of them when fewer ran), ``exact_match`` (% of ``corpus.test`` translated exactly, greedy), ``seconds``
    of training and ``parameters``. ``config``: changes to every variant's GPTConfig."""
    rows = []
    for name, changes in variants.items():
        for seed in seeds:
            start = time.perf_counter()
            model, vocab, losses = train_gpt(corpus, GPTConfig(**{**config, **changes}), steps,
                                             batch_size, seed=seed, progress=False)
            seconds = time.perf_counter() - start
            french = continue_translations(model, [en for en, _ in corpus.test], vocab)
            last = losses[-20:]  # fewer than 20 when fewer steps ran
            rows.append({"variant": name, "seed": seed, "final_loss": sum(last) / len(last),
                         "exact_match": exact_match(french, [fr for _, fr in corpus.test]),
                         "seconds": seconds, "parameters": count_parameters(model)})
    return rows
