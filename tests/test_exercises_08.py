"""Notebook 08's exercises: ``count_parameters`` and ``output_projection``.

The reference passes, each buggy variant fails with its hint, an untouched stub is "not attempted
yet", and the references agree with the model the course builds (helpers/model.py).
"""

import pytest
import torch

from helpers.exercises import EXERCISES, check, count_parameters, output_projection, solution
from helpers.model import Transformer

NAMES = ["count_parameters", "output_projection"]


def run(capsys, name, fn):
    ok = check(name, fn)
    return ok, capsys.readouterr().out


def module_count(*args, tie_weights=False):
    """Parameters of the real model, built on the meta device (no memory, no initialisation)."""
    d_model, num_heads, d_ff, num_layers, src_vocab, tgt_vocab = args
    with torch.device("meta"):
        model = Transformer(src_vocab, tgt_vocab, d_model, num_heads, num_layers, d_ff,
                            tie_weights=tie_weights)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", NAMES)
def test_reference_passes(capsys, name):
    ok, out = run(capsys, name, EXERCISES[name].reference)
    assert ok is True
    assert out.startswith(f"✅ {name}: correct on all")


# (exercise, pitfall name, a piece of the hint the learner must see)
EXPECTED = [
    ("count_parameters", "no biases", "every nn.Linear has a bias"),
    ("count_parameters", "no LayerNorm", "each LayerNorm learns a gain and a bias"),
    ("count_parameters", "one attention per decoder layer", "two attention blocks"),
    ("count_parameters", "positional encoding counted", "a fixed table (a buffer), not learned"),
    ("count_parameters", "attention counted once per head", "does not depend on num_heads"),
    ("count_parameters", "one linear layer in the feed-forward network", "two linear layers"),
    ("count_parameters", "output projection forgotten", "ends with the output projection"),
    ("count_parameters", "a vocabulary matrix shared", "three separate matrices"),
    ("count_parameters", "output projection over the source vocabulary", "scores target tokens"),
    ("output_projection", "softmax applied", "return the logits themselves"),
    ("output_projection", "log-softmax applied", "return the logits themselves"),
    ("output_projection", "weight not transposed", "x @ weight.T + bias"),
    ("output_projection", "scaled by sqrt(d_model)", "belongs to the embedding lookup only"),
    ("output_projection", "divided by sqrt(d_model)", "no scaling here"),
    ("output_projection", "bias forgotten", "add the bias"),
]


def test_every_variant_is_listed():
    registered = {(name, p.name) for name in NAMES for p in EXERCISES[name].pitfalls}
    assert registered == {(name, pitfall) for name, pitfall, _ in EXPECTED}


@pytest.mark.parametrize("name, pitfall_name, hint", EXPECTED,
                         ids=[f"{n}-{p}" for n, p, _ in EXPECTED])
def test_buggy_variant_fails_with_its_hint(capsys, name, pitfall_name, hint):
    pitfall = next(p for p in EXERCISES[name].pitfalls if p.name == pitfall_name)
    ok, out = run(capsys, name, pitfall.variant)
    assert ok is False
    assert out.startswith(f"❌ {name}: ")
    assert hint in out and pitfall.hint in out  # its own hint, not another variant's
    assert "Hint: " in out


def _stub_raises(*args):
    raise NotImplementedError("your code here")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("stub", [_stub_raises, lambda *args: None], ids=["raises", "None"])
def test_untouched_stub_is_not_attempted(capsys, name, stub):
    ok, out = run(capsys, name, stub)
    assert ok is False
    assert "not attempted yet" in out


# ------------------------------------------------------------------ count_parameters

@pytest.mark.parametrize("args", [
    (8, 2, 16, 1, 10, 12), (16, 4, 64, 2, 20, 20), (12, 3, 24, 3, 7, 30), (6, 1, 6, 1, 5, 5),
    (512, 8, 2048, 6, 37000, 37000),
])
def test_count_parameters_equals_the_real_model(args):
    assert count_parameters(*args) == module_count(*args)


def test_base_model_numbers():
    """The numbers the notebook prints: 101.0M with three matrices, 82.1M with tie_weights."""
    base = (512, 8, 2048, 6, 37000, 37000)
    assert count_parameters(*base) == 101_007_496
    assert module_count(*base, tie_weights=True) == 101_007_496 - 37000 * 512
    assert count_parameters(512, 1, 2048, 6, 37000, 37000) == count_parameters(*base)  # heads


def test_learner_answers_in_other_forms_pass(capsys):
    """A plain int, a whole float and an int64 tensor are all accepted; so is counting a model."""
    as_float = lambda *args: float(count_parameters(*args))
    as_tensor = lambda *args: torch.tensor(count_parameters(*args))
    assert run(capsys, "count_parameters", count_parameters)[0] is True
    assert run(capsys, "count_parameters", as_float)[0] is True
    assert run(capsys, "count_parameters", as_tensor)[0] is True
    assert run(capsys, "count_parameters", module_count)[0] is True


def test_a_wrong_count_names_both_numbers(capsys):
    ok, out = run(capsys, "count_parameters", lambda *args: count_parameters(*args) + 3)
    assert ok is False
    assert "expected 1788, got 1791 (largest difference 3)" in out
    assert "[case: d_model=8, num_heads=2, d_ff=16, num_layers=1, src_vocab=10, tgt_vocab=12]" \
        in out


def test_a_fractional_or_odd_answer_fails_cleanly(capsys):
    ok, out = run(capsys, "count_parameters", lambda *args: count_parameters(*args) + 0.5)
    assert ok is False and "expected dtype torch.int64, got torch.float64" in out
    ok, out = run(capsys, "count_parameters", lambda *args: str(count_parameters(*args)))
    assert ok is False and "got a str" in out
    ok, out = run(capsys, "count_parameters", lambda *args: True)
    assert ok is False and "got a bool" in out


def test_solution_shows_the_formula_not_the_wrapper(capsys):
    solution("count_parameters")
    out = capsys.readouterr().out
    assert out.startswith("# From helpers/exercises.py\ndef count_parameters(")
    assert "torch.tensor" not in out


# ------------------------------------------------------------------ output_projection

def test_output_projection_is_the_tied_generator():
    model = Transformer(10, 13, d_model=16, num_heads=4, num_layers=1, d_ff=32,
                        tie_weights=True)
    with torch.no_grad():
        model.generator.bias.uniform_(-1, 1)
    x = torch.randn(2, 5, 16)
    expected = model.generator(x)
    got = output_projection(x, model.tgt_embed.weight, model.generator.bias)
    torch.testing.assert_close(got, expected)


def test_output_projection_in_other_spellings_passes(capsys):
    linear = lambda x, w, b: torch.nn.functional.linear(x, w, b)
    einsum = lambda x, w, b: torch.einsum("...d,vd->...v", x, w) + b
    assert run(capsys, "output_projection", linear)[0] is True
    assert run(capsys, "output_projection", einsum)[0] is True
