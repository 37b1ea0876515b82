"""Notebook 12's shipped models (``assets/nb12_models.pt``): they are what the notebook's
``RETRAIN = True`` branch trains, they rebuild with the corpus's vocabularies, and the retrain
command (``python -m tests.tools --retrain-asset nb12``) writes a file that loads."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import helpers.continuation
from helpers.continuation import (
    MODELS_BUDGET,
    MODELS_PATH,
    continuation_batch,
    continuation_loss,
    joint_vocab,
    load_models,
)
from tests.tools.commands import retrain_asset
from helpers.gpt import GPT, GPTConfig
from helpers.model import Transformer, TransformerConfig
from helpers.translation import CORPUS_ARGS, make_corpus

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "12_decoder_only.ipynb"


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(**CORPUS_ARGS)


def test_the_shipped_models_are_the_notebooks_recipe(corpus):
    shipped = load_models()
    assert shipped.metadata["corpus"] == CORPUS_ARGS
    assert shipped.metadata["budget"] == MODELS_BUDGET
    assert isinstance(shipped.gpt, GPT) and shipped.gpt.config == GPTConfig(dropout=0.0)
    assert isinstance(shipped.encoder_decoder, Transformer)
    assert shipped.ed_config == replace(TransformerConfig.small(), dropout=0.0)
    assert not shipped.gpt.training and not shipped.encoder_decoder.training
    assert shipped.vocab.tokens == joint_vocab(corpus.src_vocab, corpus.tgt_vocab).tokens
    assert shipped.metadata["src_vocab"].tokens == corpus.src_vocab.tokens
    assert shipped.metadata["tgt_vocab"].tokens == corpus.tgt_vocab.tokens
    steps = MODELS_BUDGET["steps"]
    assert len(shipped.gpt_losses) == len(shipped.ed_losses) == steps  # the loss curves' data
    with torch.no_grad():  # trained: well below the uniform guess, ln V (about 6.3)
        loss = continuation_loss(shipped.gpt, continuation_batch(corpus.test[:64], shipped.vocab),
                                 label_smoothing=0.0)
    assert loss < 2.0


def test_the_notebook_trains_with_the_shipped_budget():
    """``RETRAIN = True`` in notebook 12 runs the budget that made the shipped file."""
    sources = ["".join(cell["source"]) for cell in json.loads(NOTEBOOK.read_text())["cells"]
               if cell["cell_type"] == "code"]
    budget = ("BUDGET = dict(steps={steps}, batch_size={batch_size}, seed={seed})"
              .format(**MODELS_BUDGET))
    assert sum(budget in source for source in sources) == 1
    assert sum("RETRAIN = False" in source and "load_models()" in source
               for source in sources) == 1


def test_retrain_asset_nb12_writes_models_that_load(tmp_path, monkeypatch):
    """A short ``--retrain-asset nb12``: 3 steps each, into ``tmp_path``."""
    monkeypatch.setattr(helpers.continuation, "MODELS_BUDGET", {**MODELS_BUDGET, "steps": 3})
    metadata = retrain_asset("nb12", tmp_path / "nb12.pt", progress=False)
    assert metadata["budget"]["steps"] == 3 and metadata["corpus"] == CORPUS_ARGS
    saved = load_models(tmp_path / "nb12.pt")
    assert len(saved.gpt_losses) == len(saved.ed_losses) == 3
    assert saved.metadata["gpt_final_loss"] == saved.gpt_losses[-1]
    assert not MODELS_PATH.samefile(tmp_path / "nb12.pt")
