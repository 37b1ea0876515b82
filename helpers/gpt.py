"""A decoder-only Transformer (a GPT) made of the course's own pieces: the model, translation by
continuation, sampling with the KV cache, and the modern block measured. Taught in notebook 12.

A GPT block is notebook 05's ``EncoderLayer`` (self-attention and feed-forward, each with its
residual path and norm) given notebook 06's causal mask: no encoder, no cross-attention. The
translator becomes one sequence, ``<bos> the cat eats <sep> le chat mange <eos>``, that the model
learns to continue; the loss counts the French part only (``labels`` is ``PAD_ID`` elsewhere).
The modern block's parts (RMSNorm, SwiGLU, rotary positions) are in :mod:`helpers.modern`.
Notebook 12's two trained models (this GPT and notebook 09's encoder-decoder, on one budget) ship
in ``assets/nb12_models.pt``: :func:`load_models`, retrained by :func:`retrain_models`.

Shapes: ``B`` batch, ``L`` length, ``P`` prompt length, ``V`` vocabulary, ``h`` heads, ``d_k``
head size.
"""

import dataclasses
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch
from torch import nn

from .attention import merge_heads, scaled_dot_product_attention, split_heads
from .checks import check_sizes, check_tensor, ids_in_vocabulary
from .data import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, Vocab, pad
from .decoding import eval_mode
from .layers import EncoderLayer, LayerNorm, layer_stack
from .masks import causal_mask, padding_mask
from .model import Transformer, TransformerConfig, build_model
from .modern import RMSNorm, RotaryAttention, SwiGLU, apply_rope, rope_angles
from .positional import PositionalEncoding
from .training import count_parameters, label_smoothed_nll, make_optimizer, train
from .translation import CORPUS_ARGS, exact_match, make_corpus, train_translator
from .utils import set_seed

SEP = "<sep>"  # between the English sentence and its French continuation


# ---- The model ----------------------------------------------------------------------------------

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
        check_sizes("GPT", vocab_size=vocab_size, max_len=config.max_len)
        self.config = config
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
        return self.positional.dropout(x)

    def forward(self, tokens: torch.Tensor, mask=None) -> torch.Tensor:
        """``tokens (B, L)`` -> logits ``(B, L, V)``. ``mask``: True = may attend, ``(B, 1, L,
        L)`` (causal and padding, as :func:`continuation_batch` makes it); None: causal."""
        x = self.embed_tokens(tokens)  # (B, L, d_model)
        if mask is None:
            mask = causal_mask(tokens.shape[1], device=tokens.device)[None, None]  # (1, 1, L, L)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.final_norm(x))  # (B, L, d_model) -> (B, L, V)


# ---- Translation by continuation -------------------------------------------------------------

def joint_vocab(src_vocab: Vocab, tgt_vocab: Vocab) -> Vocab:
    """One vocabulary for both languages: the specials, ``<sep>``, English, then French words
    (a word both languages write the same way, such as "a", is one token)."""
    english = src_vocab.tokens[len(SPECIAL_TOKENS):]
    french = [w for w in tgt_vocab.tokens[len(SPECIAL_TOKENS):] if w not in set(english)]
    return Vocab([*SPECIAL_TOKENS, SEP, *english, *french])


def prompt_ids(sentences: list, vocab: Vocab) -> list:
    """English strings -> ``<bos> english <sep>`` id lists, ready to be continued."""
    return [[BOS_ID, *vocab.encode(s), vocab.ids[SEP]] for s in sentences]


def continuation_example(prompt: list, answer: list) -> tuple:
    """The input and the labels of one pair: ``prompt`` (``<bos> english <sep>`` ids) followed
    by ``answer`` (``french <eos>`` ids). The input is the whole sequence but its last token;
    the label of position t is token t + 1, or ``PAD_ID`` (which the loss ignores) where that
    token is still the prompt's: the loss counts the French words and ``<eos>`` only."""
    sequence = prompt + answer
    labels = [PAD_ID] * (len(prompt) - 1) + answer  # <sep>'s position predicts the first word
    return sequence[:-1], labels


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
    prompts = prompt_ids([english for english, _ in pairs], vocab)
    answers = [[*vocab.encode(french), EOS_ID] for _, french in pairs]
    examples = [continuation_example(p, a) for p, a in zip(prompts, answers, strict=True)]
    tokens = pad([inputs for inputs, _ in examples])  # (B, L)
    mask = causal_mask(tokens.shape[1]) & padding_mask(tokens, PAD_ID)  # (B, 1, L, L)
    return ContinuationBatch(tokens, pad([labels for _, labels in examples]), mask)


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


# ---- Notebook 12's two trained models, shipped in assets/ -------------------------------------

MODELS_PATH = Path(__file__).resolve().parents[1] / "assets" / "nb12_models.pt"
MODELS_BUDGET = {"steps": 200, "batch_size": 64, "seed": 0}  # notebook 12's BUDGET, for both


class TrainedModels(NamedTuple):
    """Notebook 12's decoder-only model and notebook 09's encoder-decoder, trained alike."""

    gpt: GPT
    vocab: Vocab  # the GPT's joint vocabulary
    gpt_losses: list
    encoder_decoder: Transformer  # translates corpus.src_vocab ids into corpus.tgt_vocab ids
    ed_losses: list
    ed_config: TransformerConfig
    metadata: dict


def train_models(corpus, steps: int = 200, batch_size: int = 64, seed: int = 0,
                 progress: bool = False) -> TrainedModels:
    """Notebook 12's section 4: the GPT (``GPTConfig()``) and notebook 09's encoder-decoder
    (``TransformerConfig.small()``), both without dropout, on the same budget and seed."""
    budget = {"steps": steps, "batch_size": batch_size, "seed": seed, "progress": progress}
    start = time.perf_counter()
    gpt, vocab, gpt_losses = train_gpt(corpus, GPTConfig(dropout=0.0), **budget)
    ed_config = dataclasses.replace(TransformerConfig.small(), dropout=0.0)
    encoder_decoder, ed_losses = train_translator(corpus, ed_config, **budget)
    metadata = {"budget": {"steps": steps, "batch_size": batch_size, "seed": seed},
                "train_seconds": round(time.perf_counter() - start, 1),
                "torch_threads": torch.get_num_threads(),
                "cpu_capability": torch.backends.cpu.get_cpu_capability()}  # ATEN_CPU_CAPABILITY
    return TrainedModels(gpt, vocab, gpt_losses, encoder_decoder, ed_losses, ed_config, metadata)


def save_models(models: TrainedModels, path, src_vocab: Vocab, tgt_vocab: Vocab) -> None:
    """Both models as plain types (configs, token lists, weights, loss histories), for
    :func:`load_models`' safe ``torch.load(weights_only=True)``."""
    def weights(model):
        return {k: v.detach().cpu() for k, v in model.state_dict().items()}

    torch.save({"format": 1,
                "gpt": {"config": dataclasses.asdict(models.gpt.config),
                        "vocab": list(models.vocab.tokens), "state_dict": weights(models.gpt),
                        "losses": [float(v) for v in models.gpt_losses]},
                "encoder_decoder": {"config": dataclasses.asdict(models.ed_config),
                                    "src_vocab": list(src_vocab.tokens),
                                    "tgt_vocab": list(tgt_vocab.tokens),
                                    "state_dict": weights(models.encoder_decoder),
                                    "losses": [float(v) for v in models.ed_losses]},
                "metadata": dict(models.metadata)}, path)


def load_models(path=MODELS_PATH) -> TrainedModels:
    """Notebook 12's two trained models (``assets/nb12_models.pt``), in eval mode, on the CPU.
    ``metadata["src_vocab"]`` and ``["tgt_vocab"]`` are the encoder-decoder's vocabularies."""
    saved = torch.load(path, map_location="cpu", weights_only=True)
    g, e = saved["gpt"], saved["encoder_decoder"]
    gpt, vocab = GPT(len(g["vocab"]), GPTConfig(**g["config"])), Vocab(g["vocab"])
    gpt.load_state_dict(g["state_dict"])
    ed_config = TransformerConfig(**e["config"])
    encoder_decoder = build_model(ed_config, len(e["src_vocab"]), len(e["tgt_vocab"]))
    encoder_decoder.load_state_dict(e["state_dict"])
    metadata = {**saved["metadata"], "src_vocab": Vocab(e["src_vocab"]),
                "tgt_vocab": Vocab(e["tgt_vocab"])}
    return TrainedModels(gpt.eval(), vocab, g["losses"], encoder_decoder.eval(), e["losses"],
                         ed_config, metadata)


def retrain_models(path=None, progress: bool = True) -> dict:
    """Retrain notebook 12's two models from scratch on the course's corpus (``CORPUS_ARGS``,
    ``MODELS_BUDGET``), save them to ``path`` (default ``assets/nb12_models.pt``) and return
    their metadata: ``python -m helpers.course --retrain-asset nb12``."""
    corpus = make_corpus(**CORPUS_ARGS)
    models = train_models(corpus, **MODELS_BUDGET, progress=progress)
    metadata = {"corpus": dict(CORPUS_ARGS), **models.metadata,
                "gpt_final_loss": models.gpt_losses[-1], "ed_final_loss": models.ed_losses[-1]}
    save_models(models._replace(metadata=metadata), path or MODELS_PATH, corpus.src_vocab,
                corpus.tgt_vocab)
    return metadata


# ---- Generation: sampling, the KV cache, the loop ---------------------------------------------

def check_sampling(temperature, top_k, top_p) -> None:
    """:func:`filter_logits`' settings: ``temperature > 0``, ``top_k`` a whole number >= 1,
    ``top_p`` in [0, 1] (None: that filter is off)."""
    if not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"temperature must be > 0 (use greedy decoding for 0), got {temperature}")
    if top_k is not None:
        check_sizes("filter_logits", top_k=top_k)  # top_k=0 would keep no token at all
    if top_p is not None and not (isinstance(top_p, (int, float)) and 0 <= top_p <= 1):
        raise ValueError(f"filter_logits: top_p must be a probability in [0, 1], got {top_p!r}")


def filter_logits(logits: torch.Tensor, temperature: float = 1.0, top_k=None, top_p=None):
    """Next-token logits ``(B, V)`` divided by ``temperature``, then only the ``top_k`` largest
    kept, then only the smallest set of most likely tokens whose probabilities reach ``top_p``
    (the token that crosses ``top_p`` is kept); the others become ``-inf``."""
    check_sampling(temperature, top_k, top_p)
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


def sample_next(logits: torch.Tensor, temperature: float = 0.0, top_k=None, top_p=None,
                generator=None) -> torch.Tensor:
    """The next token of each row of ``logits (B, V)`` -> ``(B,)``: the most likely one for
    ``temperature=0`` (greedy), else one drawn with ``generator`` after :func:`filter_logits`."""
    if temperature == 0:
        check_sampling(1.0, top_k, top_p)  # unused by greedy decoding, but still settings
        return logits.argmax(dim=-1)
    probs = filter_logits(logits, temperature, top_k, top_p).softmax(dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


def cached_self_attention(attn, x: torch.Tensor, cache, start: int) -> tuple:
    """A block's self-attention for ``x (B, T, d_model)``, the tokens at positions ``start ...``,
    over the keys and values in ``cache`` (positions ``0 ... start - 1``, or None) and their own.
    Returns the output ``(B, T, d_model)`` and the extended cache ``(keys, values)``."""
    q = split_heads(attn.w_q(x), attn.num_heads)  # (B, h, T, d_k)
    k = split_heads(attn.w_k(x), attn.num_heads)
    v = split_heads(attn.w_v(x), attn.num_heads)
    if isinstance(attn, RotaryAttention):  # rotated by their absolute positions
        angles = rope_angles(x.shape[1], attn.d_k, start=start).to(x.device)
        q, k = apply_rope(q, angles), apply_rope(k, angles)
    if cache is not None:  # the earlier positions come first
        k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)  # (B, h, t, d_k)
    T, t = q.shape[2], k.shape[2]
    mask = causal_mask(t, device=x.device)[None, None, t - T:]  # (1, 1, T, t): the new rows
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    return attn.w_o(merge_heads(out)), (k, v)


def cached_forward(model: GPT, tokens: torch.Tensor, cache: list, start: int) -> torch.Tensor:
    """``model(tokens)`` for ``tokens (B, T)`` at positions ``start ...``, in eval mode, given
    the keys and values of positions ``0 ... start - 1`` in ``cache`` (one entry per block, None
    before the first call), which this call extends. Returns the logits ``(B, T, V)``."""
    x = model.embed_tokens(tokens, start)  # (B, T, d_model)
    for i, block in enumerate(model.blocks):  # notebook 05's two sub-layers, dropout left out
        if block.norm_first:
            out, cache[i] = cached_self_attention(block.self_attn, block.norm1(x), cache[i], start)
            x = x + out
            x = x + block.feed_forward(block.norm2(x))
        else:
            out, cache[i] = cached_self_attention(block.self_attn, x, cache[i], start)
            x = block.norm1(x + out)
            x = block.norm2(x + block.feed_forward(x))
    return model.head(model.final_norm(x))  # (B, T, V)


def check_prompt_fits(model: GPT, length: int, where: str) -> None:
    """A prompt of ``length`` tokens must leave at least one position of the model's
    ``max_len`` for a new token (an empty prompt has nothing to continue)."""
    if length < 1:
        raise ValueError(f"{where}: a prompt needs at least one token (<sep> at least), got none")
    if length >= model.config.max_len:
        raise ValueError(f"{where}: the prompt has {length} tokens, but the model has positions "
                         f"0..{model.config.max_len - 1} (max_len={model.config.max_len}), so "
                         f"there is no room for a new token; shorten the prompt to at most "
                         f"{model.config.max_len - 1} tokens")


@torch.no_grad()
def generate_tokens(model: GPT, prompt: torch.Tensor, max_new: int, temperature: float = 0.0,
                    top_k=None, top_p=None, generator=None, use_cache: bool = True):
    """``prompt (B, P)``, prompts of one length, -> ``(B, P + n)``: each row continued by
    ``n <= max_new`` tokens of :func:`sample_next`, never beyond ``model.config.max_len``. A row
    that has written ``<eos>`` gets ``<eos>`` after it; the loop stops when every row has.
    ``use_cache``: the prompt goes through :func:`cached_forward` once (the prefill), then each
    new token alone; otherwise the whole sequence goes through the model at every step."""
    check_prompt_fits(model, prompt.shape[-1], "generate_tokens")
    out, cache = prompt, [None] * len(model.blocks)  # the cache: one (keys, values) per block
    finished = torch.zeros(len(prompt), dtype=torch.bool, device=prompt.device)
    for _ in range(min(max_new, model.config.max_len - prompt.shape[1])):
        if use_cache:
            new = out if cache[0] is None else out[:, -1:]  # the prefill, then the newest token
            logits = cached_forward(model, new, cache, start=out.shape[1] - new.shape[1])
        else:
            logits = model(out)  # (B, t, V): every position again
        next_token = sample_next(logits[:, -1], temperature, top_k, top_p, generator)  # (B,)
        next_token = next_token.masked_fill(finished, EOS_ID)  # a finished row stays finished
        out = torch.cat([out, next_token[:, None]], dim=1)  # (B, t + 1)
        finished |= next_token == EOS_ID
        if finished.all():
            break
    return out


def generate(model: GPT, prompts: list, max_new: int, temperature: float = 0.0, top_k=None,
             top_p=None, generator=None, use_cache: bool = True) -> list:
    """Continue each prompt (a list of ids) by at most ``max_new`` tokens, up to ``<eos>``, with
    :func:`generate_tokens` (greedy for ``temperature=0``); prompts of one length are continued
    together, as one batch. Returns the new ids of each prompt (without ``<eos>``), in order."""
    check_sizes("generate", max_new=max_new)
    if torch.is_tensor(prompts):  # (B, P) ids: a list of P ids per prompt
        prompts = prompts.tolist()
    for ids in prompts:  # before any work: every prompt leaves room for a new token
        check_prompt_fits(model, len(ids), "generate")
    by_length, results = {}, [None] * len(prompts)
    for i, ids in enumerate(prompts):
        by_length.setdefault(len(ids), []).append(i)
    device = next(model.parameters()).device
    with eval_mode(model):
        for length, rows in by_length.items():
            prompt = torch.tensor([prompts[i] for i in rows], device=device)  # (b, length)
            out = generate_tokens(model, prompt, max_new, temperature, top_k, top_p, generator,
                                  use_cache)
            for row, ids in zip(rows, out[:, length:].tolist(), strict=True):
                results[row] = ids[:ids.index(EOS_ID)] if EOS_ID in ids else ids
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
