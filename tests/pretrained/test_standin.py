"""Notebook 15's offline stand-in, ``assets/nb15_marian/``: a small ``MarianMTModel`` trained on
the course's corpus, loaded as the real model is (``save_pretrained``'s folder), and its
retraining (``python -m tests.tools --retrain-asset marian``), run here for a few steps.

What the notebook shows of it must hold on any CPU: its translations of the notebook's
sentences are checked in float32 and in float64 (other last bits), with the course's decoders
and with Hugging Face's ``generate``.
"""

import ast
import json
from pathlib import Path

import pytest
import torch

from helpers import pretrained
from tests.tools.commands import retrain_asset
from helpers.decoding import beam_search, greedy_decode
from helpers.masks import padding_mask
from helpers.pretrained import (
    MATCHING,
    STANDIN_CORPUS_ARGS,
    STANDIN_PATH,
    load_marian,
    load_standin,
    sentence_case,
)
from helpers.translation import make_corpus

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "15_pretrained_translator.ipynb"
# the notebook's sentences, each with the French of the course's grammar
FRENCH = {"I like the white car.": "J'aime la voiture blanche.",
          "My old dog eats a big cake.": "Mon vieux chien mange un grand gâteau.",
          "The small girls wash the red cups.": "Les petites filles lavent les tasses rouges.",
          "The old queen listens to the small girls.":
              "La vieille reine écoute les petites filles."}


def notebook_sentences() -> list:
    """The value of ``SENTENCES = [...]`` in the notebook's code."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        if cell["cell_type"] == "code":
            for node in ast.parse("".join(cell["source"])).body:
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == \
                        "SENTENCES":
                    return ast.literal_eval(node.value)
    raise AssertionError("no SENTENCES in the notebook")


@pytest.fixture(scope="module")
def standin():
    return load_standin()


def test_the_notebook_translates_the_sentences_checked_here():
    assert notebook_sentences() == list(FRENCH)


def test_no_sentence_of_the_notebook_was_a_training_sentence():
    corpus = make_corpus(**STANDIN_CORPUS_ARGS)
    seen = {sentence_case(en) for en, _ in corpus.train + corpus.valid}
    assert not seen & set(FRENCH)


def test_the_shipped_standin_has_the_published_conventions(standin):
    model, tokenizer = standin
    config, V = model.config, len(tokenizer)
    assert not model.training and config.vocab_size == V
    assert (config.activation_function, config.scale_embedding) == ("swish", True)
    assert config.share_encoder_decoder_embeddings and config.tie_word_embeddings
    assert (config.eos_token_id, config.pad_token_id, config.decoder_start_token_id,
            config.bos_token_id) == (0, V - 1, V - 1, 0)
    generation = model.generation_config
    assert (generation.num_beams, generation.bad_words_ids) == (4, [[V - 1]])
    assert generation.forced_eos_token_id == 0 and generation.early_stopping is not True
    bias = model.final_logits_bias
    assert bias.shape == (1, V) and bias.abs().max() > 0.1  # trained: not transformers' zeros
    assert tokenizer.convert_ids_to_tokens([0, 1, V - 1]) == ["</s>", "<unk>", "<pad>"]


def test_the_metadata_of_its_training():
    metadata = json.loads((STANDIN_PATH / "training.json").read_text(encoding="utf-8"))
    assert metadata["corpus"] == STANDIN_CORPUS_ARGS
    assert metadata["valid_exact_match"] >= 0.9 and metadata["test_exact_match"] >= 0.8


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_it_translates_the_notebooks_sentences_with_every_decoder(standin, dtype):
    """Right, and the same tokens with generate and the course's decoders, in both precisions:
    no decision of the notebook hangs on the last bits."""
    hf, tokenizer = standin
    hf = hf.to(dtype)
    try:
        ours = load_marian(hf.config, hf.state_dict()).to(dtype)
        batch = tokenizer(list(FRENCH), padding=True, return_tensors="pt")
        src, pad = batch.input_ids, hf.config.pad_token_id
        start, eos, max_len = pad, hf.config.eos_token_id, src.shape[1] + 10
        french = list(FRENCH.values())

        def text(ids):
            return tokenizer.decode(ids, skip_special_tokens=True)

        greedy = greedy_decode(ours, src, max_len, start, eos, padding_mask(src, pad))
        assert [text(row) for row in greedy] == french
        generated = hf.generate(**batch, num_beams=1, max_new_tokens=max_len, **MATCHING)
        assert [text(row) for row in generated] == french
        for row, wanted in zip(src, french, strict=True):
            alone = row[row != pad][None]
            best = beam_search(ours, alone, 4, max_len, start, eos, length_penalty=1.0)[0][0]
            assert text(best) == wanted
            theirs = hf.generate(input_ids=alone, num_beams=4, length_penalty=1.0,
                                 max_new_tokens=max_len, **MATCHING)[0]
            assert text(theirs) == wanted
            assert text(hf.generate(input_ids=alone)[0]) == wanted  # the published defaults
    finally:
        hf.float()


def test_retrain_asset_trains_and_saves_a_loadable_standin(tmp_path, monkeypatch):
    """The retraining path, briefly: a small corpus, a few steps."""
    monkeypatch.setattr(pretrained, "STANDIN_CORPUS_ARGS",
                        {"seed": 1, "num_train": 400, "num_valid": 20, "num_test": 20})
    monkeypatch.setattr(pretrained, "STANDIN_TRAINING",
                        {**pretrained.STANDIN_TRAINING, "steps": 3, "batch_size": 16})
    monkeypatch.setattr(pretrained, "STANDIN_VOCAB_SIZE", 120)
    metadata = retrain_asset("marian", tmp_path, progress=False)
    assert metadata["training"]["steps"] == 3
    assert 0 <= metadata["test_exact_match"] <= 1
    assert json.loads((tmp_path / "training.json").read_text(encoding="utf-8")) == metadata
    hf, tokenizer = load_standin(tmp_path)
    assert len(tokenizer) == hf.config.vocab_size == metadata["vocab_size"]
    assert hf.final_logits_bias.abs().max() > 0  # trained from zeros, saved with the weights
    batch = tokenizer(["My old dog eats a big cake.", "I like cars."], padding=True,
                      return_tensors="pt")
    src, pad = batch.input_ids, hf.config.pad_token_id
    tgt = torch.full((2, 3), pad)
    with torch.no_grad():
        theirs = hf(**batch, decoder_input_ids=tgt).logits
        mine = load_marian(hf.config, hf.state_dict())(src, tgt, padding_mask(src, pad))
    assert torch.allclose(mine, theirs, atol=1e-5 * theirs.abs().max().item())
