"""Notebook 09's exercises: ``transformer_lr`` and ``label_smoothed_nll``.

The reference passes, each buggy variant fails with its hint, an untouched stub is "not attempted
yet", and other correct spellings (a plain float, ``F.cross_entropy`` itself) pass.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from helpers.exercises import EXERCISES, check, solution
from helpers.training import label_smoothed_nll, transformer_lr

NAMES = ["transformer_lr", "label_smoothed_nll"]


def run(capsys, name, fn):
    ok = check(name, fn)
    return ok, capsys.readouterr().out


@pytest.mark.parametrize("name", NAMES)
def test_reference_passes(capsys, name):
    ok, out = run(capsys, name, EXERCISES[name].reference)
    assert ok is True
    assert out.startswith(f"✅ {name}: correct on all")


# (exercise, pitfall name, a piece of the hint the learner must see)
EXPECTED = [
    ("transformer_lr", "steps counted from 0", "the paper counts steps from 1"),
    ("transformer_lr", "max instead of min", "take the min of the two arms"),
    ("transformer_lr", "exponents swapped", "with the exponents swapped"),
    ("transformer_lr", "warmup^-0.5", "the warm-up arm is step * warmup^-1.5"),
    ("transformer_lr", "no d_model factor", "multiply by d_model^-0.5"),
    ("transformer_lr", "sqrt(d_model) instead of its inverse", "not sqrt(d_model)"),
    ("label_smoothed_nll", "smoothing term kept on padding", "not even the epsilon share"),
    ("label_smoothed_nll", "KL divergence with log(0)", "0 * log(0) = NaN"),
    ("label_smoothed_nll", "KL divergence instead of cross-entropy", "minus the entropy"),
    ("label_smoothed_nll", "epsilon spread over V - 1 tokens", "over all V tokens"),
    ("label_smoothed_nll", "padding not ignored", "a padded position is not a word to predict"),
    ("label_smoothed_nll", "divided by every position", "divide by the number of real"),
    ("label_smoothed_nll", "summed instead of averaged", "average over the real tokens"),
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
    assert "Hint" in out


def test_t3_variants_carry_the_pitfall_id(capsys):
    for pitfall in EXERCISES["label_smoothed_nll"].pitfalls[:2]:
        assert pitfall.id == "T3"
        assert "Hint [T3]" in run(capsys, "label_smoothed_nll", pitfall.variant)[1]


def _stub_raises(*args):
    raise NotImplementedError("your code here")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("stub", [_stub_raises, lambda *args: None], ids=["raises", "None"])
def test_untouched_stub_is_not_attempted(capsys, name, stub):
    ok, out = run(capsys, name, stub)
    assert ok is False
    assert "not attempted yet" in out


# ------------------------------------------------------------------ transformer_lr

def test_learning_rate_as_a_plain_float_or_with_math_passes(capsys):
    with_math = lambda s, d, w: min(1 / math.sqrt(s), s / w ** 1.5) / math.sqrt(d)
    assert run(capsys, "transformer_lr", transformer_lr)[0] is True  # returns a float
    assert run(capsys, "transformer_lr", with_math)[0] is True


def test_a_slightly_wrong_rate_fails(capsys):
    """The rates are around 1e-3 to 1e-7: an absolute tolerance would let anything pass."""
    ok, out = run(capsys, "transformer_lr", lambda s, d, w: 1.01 * transformer_lr(s, d, w))
    assert ok is False and "wrong value" in out
    ok, out = run(capsys, "transformer_lr", lambda s, d, w: 0.0)
    assert ok is False


def test_learning_rate_peak_is_at_warmup():
    rates = [transformer_lr(s, 64, 200) for s in range(1, 1001)]
    assert rates.index(max(rates)) + 1 == 200
    assert max(rates) == pytest.approx(1 / math.sqrt(64 * 200))


# ------------------------------------------------------------------ label_smoothed_nll

def test_f_cross_entropy_passes_and_equals_the_reference(capsys):
    def with_torch(logits, labels, epsilon, ignore_index):
        V = logits.shape[-1]
        return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1),
                               label_smoothing=epsilon, ignore_index=ignore_index)

    assert run(capsys, "label_smoothed_nll", with_torch)[0] is True
    for case in EXERCISES["label_smoothed_nll"].cases():
        torch.testing.assert_close(case.run(label_smoothed_nll), case.run(with_torch))


def test_cases_contain_padding_and_epsilon_zero():
    cases = EXERCISES["label_smoothed_nll"].cases()
    assert any((labels == ignore).any() for _, labels, _, ignore in (c.args for c in cases))
    assert any(epsilon == 0.0 for _, _, epsilon, _ in (c.args for c in cases))


def test_solution_prints_the_helpers_code(capsys):
    solution("label_smoothed_nll")
    assert capsys.readouterr().out.startswith("# From helpers/training.py\ndef label_smoothed_nll(")
    solution("transformer_lr")
    out = capsys.readouterr().out
    assert out.startswith("# From helpers/training.py\ndef transformer_lr(")
    assert "torch.tensor" not in out
