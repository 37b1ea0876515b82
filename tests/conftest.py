"""Fixtures shared by every test folder (the repository's conftest.py sets up the environment).

- ``run_check``: call ``helpers.exercises.check`` and capture what it printed;
- ``tiny_model``: a small seeded Transformer, built by the test with the sizes it needs;
- ``shipped``: the shipped translator (assets/translator.pt), loaded once per worker;
- figures are closed after every test that opened one.
"""

import sys

import pytest
import torch

TINY = dict(d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.1)


@pytest.fixture
def run_check(capsys):
    """``run_check(name, fn, **kwargs) -> (passed, printed_text)``."""
    from helpers.exercises import check

    def run(name, fn, **kwargs):
        passed = check(name, fn, **kwargs)
        return passed, capsys.readouterr().out

    return run


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    pyplot = sys.modules.get("matplotlib.pyplot")  # only when a test drew something
    if pyplot is not None:
        pyplot.close("all")


@pytest.fixture
def tiny_model():
    """``tiny_model(vocab=12, seed=0, **sizes) -> Transformer``: seeded with ``seed``, in eval mode,
    ``TINY``'s sizes unless ``sizes`` say otherwise, and an output layer scaled up: sharper and
    more varied predictions than at initialisation, so that decoders have choices to make."""
    from helpers.model import Transformer

    def make(vocab=12, seed=0, **sizes):
        torch.manual_seed(seed)
        model = Transformer(vocab, vocab, **{**TINY, **sizes}).eval()
        with torch.no_grad():
            model.generator.weight.mul_(8.0)
            model.generator.bias.normal_(0.0, 1.0)
        return model

    return make


@pytest.fixture(scope="session")
def shipped():
    """The shipped translator, ``load_translator()``: its ``model``, vocabularies and metadata.
    Shared by the tests of a worker: use it, never change it."""
    from helpers.translation import load_translator

    return load_translator()
