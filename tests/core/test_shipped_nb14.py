"""Notebook 14's shipped translators (``assets/nb14_*.pt``): each retrains through the command's
path (``python -m tests.tools --retrain-asset nb14_words`` and so on), here for 3 steps into a
temporary folder, and each shipped file is the model its recipe names."""

import pytest

from tests.tools.commands import retrain_asset
from helpers.training import load_checkpoint
from helpers.translation import CORPUS_ARGS, make_corpus
from helpers.translation.names import (
    NAMED_ASSETS,
    NAMED_KINDS,
    NAMED_MERGES,
    NAMED_STEPS,
    load_named_translator,
    name_corpus,
    named_vocabularies,
)


@pytest.fixture(scope="module")
def vocabularies():
    return named_vocabularies(name_corpus(make_corpus(**CORPUS_ARGS)))


@pytest.mark.filterwarnings("ignore:translate:UserWarning")  # 3 steps: it cannot translate yet
@pytest.mark.parametrize("kind", list(NAMED_KINDS))
def test_retrain_asset_trains_each_shipped_model(kind, tmp_path, monkeypatch, vocabularies):
    from functools import partial

    import helpers.translation.names as names

    monkeypatch.setattr(names, "NAMED_STEPS", 3)
    monkeypatch.setattr(names, "name_corpus", partial(names.name_corpus, test_size=20))  # quick
    metadata = retrain_asset(f"nb14_{kind}", tmp_path / f"{kind}.pt", progress=False)
    assert metadata["kind"] == kind and metadata["training"]["steps"] == 3
    assert set(metadata["scores"]) == {"ordinary", "names", "new_syllables"}
    saved = load_checkpoint(tmp_path / f"{kind}.pt")
    assert saved.metadata == metadata
    assert saved.src_vocab.tokens == list(vocabularies[kind][0].tokens)
    assert saved.config.tie_weights == (kind == "tied")


@pytest.mark.parametrize("kind", list(NAMED_KINDS))
def test_each_shipped_model_is_its_recipe(kind, vocabularies):
    checkpoint = load_named_translator(kind)
    training = checkpoint.metadata["training"]
    assert checkpoint.metadata["kind"] == kind and NAMED_ASSETS[kind].is_file()
    assert training == {"steps": NAMED_STEPS, "batch_size": 128, "warmup": 200, "seed": 0}
    assert checkpoint.metadata["corpus"] == CORPUS_ARGS
    assert checkpoint.metadata["merges"] == NAMED_MERGES
    src, tgt = vocabularies[kind]
    assert checkpoint.src_vocab.tokens == list(src.tokens)
    assert checkpoint.tgt_vocab.tokens == list(tgt.tokens)
    model = checkpoint.model
    if kind == "tied":
        assert model.src_embed.weight is model.tgt_embed.weight is model.generator.weight
