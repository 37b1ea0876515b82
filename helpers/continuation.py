"""Translation by continuation (notebook 12): the GPT's data, its training, notebook 12's two
shipped models, and the block variants compared.

The translator becomes one sequence, ``<bos> the cat eats <sep> le chat mange <eos>``, that the
model learns to continue; the loss counts the French part only (``labels`` is ``PAD_ID``
elsewhere). Notebook 12's two trained models (the GPT and notebook 09's encoder-decoder, on one
budget) ship in ``assets/nb12_models.pt``: :func:`load_models`, retrained by
:func:`retrain_models`. :func:`compare_blocks` trains every block variant of :data:`VARIANTS`.
"""

import dataclasses
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch

from .data import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, Vocab, pad
from .generation import generate
from .gpt import GPT, GPTConfig
from .masks import causal_mask, padding_mask
from .model import Transformer, TransformerConfig, build_model
from .training import count_parameters, label_smoothed_nll, make_optimizer, train
from .translation import CORPUS_ARGS, exact_match, make_corpus, train_translator
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


def continue_translations(model: GPT, sentences: list, vocab: Vocab, **options) -> list:
    """English strings -> the French the model writes after ``<sep>`` (greedy by default)."""
    outputs = generate(model, prompt_ids(sentences, vocab), options.pop("max_new", 20), **options)
    return [vocab.decode(ids) for ids in outputs]


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


# ---- The block variants, compared ----------------------------------------------------------------

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
