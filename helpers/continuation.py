"""Translation by continuation (notebook 12): the GPT learns to continue ``<bos> the cat eats
<sep> le chat mange <eos>``, its loss on the French part only. Also notebook 12's two shipped
models (``assets/nb12_models.pt``) and the block variants compared.
"""

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch

from .data import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, Vocab, pad, shuffled_chunks
from .generation import generate
from .gpt import GPT, GPTConfig
from .masks import causal_mask, padding_mask
from .model import Transformer, TransformerConfig, build_model
from .training import count_parameters, label_smoothed_nll, make_optimizer, train
from .translation import exact_match
from .utils import set_seed

SEP = "<sep>"  # between the English sentence and its French continuation


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
    """Endless :class:`ContinuationBatch` es of ``pairs``, reshuffled every epoch (seeded)."""
    if not 1 <= batch_size <= len(pairs):  # no full batch: the loop would never yield
        raise ValueError(f"continuation_batches: batch_size={batch_size} needs between 1 and "
                         f"len(pairs) = {len(pairs)} pairs per batch")
    for chunk in shuffled_chunks(pairs, batch_size, seed):
        yield continuation_batch(chunk, vocab)


def train_gpt(corpus, config: GPTConfig, steps: int = 600, batch_size: int = 128,
              warmup: int = 200, lr_scale: float = 1.0, seed: int = 0, progress: bool = True,
              max_seconds=None, on_step=None):
    """``(model in eval mode, vocab, losses)``: a :class:`GPT` trained on ``corpus.train`` by
    continuation, as notebook 09 trains the encoder-decoder."""
    vocab = joint_vocab(corpus.src_vocab, corpus.tgt_vocab)
    set_seed(seed)
    model = GPT(len(vocab), config)
    optimizer, scheduler = make_optimizer(model, config.d_model, warmup, lr_scale)
    losses = train(model, continuation_batches(corpus.train, vocab, batch_size, seed),
                   continuation_loss, optimizer, scheduler, max_steps=steps,
                   max_seconds=max_seconds, progress=progress, on_step=on_step)
    return model.eval(), vocab, losses


def continue_translations(model: GPT, sentences: list, vocab: Vocab, **options) -> list:
    """English strings -> the French the model writes after ``<sep>`` (greedy by default)."""
    outputs = generate(model, prompt_ids(sentences, vocab), options.pop("max_new", 20), **options)
    return [vocab.decode(ids) for ids in outputs]


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


def load_models(path=MODELS_PATH) -> TrainedModels:
    """Notebook 12's two trained models, in eval mode; the encoder-decoder's vocabularies are
    ``metadata["src_vocab"]`` and ``["tgt_vocab"]``."""
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


def compare_blocks(corpus, variants: dict = VARIANTS, seeds=(0, 1, 2), steps: int = 300,
                   batch_size: int = 64, **config) -> list:
    """Train every variant with every seed; one row each: ``final_loss`` (the mean of the last
    20 steps' losses), ``exact_match`` (% of ``corpus.test`` translated exactly, greedy),
    ``seconds`` of training and ``parameters``. ``config``: changes to every variant's GPTConfig."""
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
