"""The course's translators: one call to train one, and the shipped ones (``--retrain-asset``)."""

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Optional

from ..data import batches, encode_pairs
from ..model import TransformerConfig, build_model
from ..training import Checkpoint, load_checkpoint, make_optimizer, train, translation_loss
from ..utils import set_seed

ASSET_PATH = Path(__file__).resolve().parents[2] / "assets" / "translator.pt"
NEGATION_ASSET_PATH = ASSET_PATH.with_name("translator_negation.pt")

CORPUS_ARGS = {"seed": 0, "num_train": 20000, "num_valid": 500, "num_test": 1000}
ASSET_STEPS = 2000  # the shipped model trains longer than train_translator's default
# notebook 10's second model: 3% of the sentences negated (rare), train_translator's budget
NEGATION_CORPUS_ARGS, NEGATION_STEPS = {**CORPUS_ARGS, "negation": 0.03}, 600


def train_translator(corpus, config: Optional[TransformerConfig] = None, steps: int = 600,
                     batch_size: int = 128, warmup: int = 200, lr_scale: float = 1.0,
                     label_smoothing: float = 0.1, clip_norm: float = 1.0, seed: int = 0,
                     max_seconds: Optional[float] = None, device=None, progress: bool = True,
                     on_step=None, one_matrix: bool = False):
    """Build a model for ``corpus`` and train it (defaults: about 99% exact match in 35 to 50 s on
    a laptop CPU); ``one_matrix``: one matrix for both embeddings and the output projection."""
    if one_matrix and corpus.src_vocab is not corpus.tgt_vocab:
        raise ValueError("train_translator(one_matrix=True) needs one vocabulary for both "
                         "languages")
    config = config or TransformerConfig.small()
    if one_matrix:
        config = replace(config, tie_weights=True)
    set_seed(seed)
    model = build_model(config, len(corpus.src_vocab), len(corpus.tgt_vocab))
    if one_matrix:
        model.src_embed.weight = model.tgt_embed.weight  # the third use of the one matrix
    if device is not None:
        model.to(device)
    optimizer, scheduler = make_optimizer(model, config.d_model, warmup, lr_scale)
    encoded = encode_pairs(corpus.train, corpus.src_vocab, corpus.tgt_vocab)
    loss_fn = partial(translation_loss, label_smoothing=label_smoothing)
    history = train(model, batches(encoded, batch_size, seed=seed, repeat=True), loss_fn,
                    optimizer, scheduler, max_steps=steps, clip_norm=clip_norm,
                    max_seconds=max_seconds, device=device, progress=progress, on_step=on_step)
    return model.eval(), history


def load_translator(path=ASSET_PATH, device="cpu") -> Checkpoint:
    """A shipped translator; ``metadata["corpus"]`` holds its :func:`~.corpus.make_corpus` args."""
    return load_checkpoint(path, device=device)
