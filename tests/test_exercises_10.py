"""Notebook 10's exercises: ``beam_step`` and ``length_penalized_score``.

The reference passes, each buggy variant fails with its hint (D1, D2 of helpers/pitfalls.py and
others), and an untouched stub is "not attempted yet".
"""

import pytest
import torch

from helpers.exercises import EXERCISES, beam_step, check, length_penalized_score, solution

NAMES = ["beam_step", "length_penalized_score"]


def run(capsys, name, fn):
    ok = check(name, fn)
    return ok, capsys.readouterr().out


@pytest.mark.parametrize("name", NAMES)
def test_reference_passes(capsys, name):
    ok, out = run(capsys, name, EXERCISES[name].reference)
    assert ok is True
    assert out.startswith(f"✅ {name}: correct on all")


EXPECTED = [
    ("beam_step", "probabilities added", "[D1]"),
    ("beam_step", "probabilities multiplied", "underflow"),
    ("beam_step", "log-probabilities multiplied", "[D1]"),
    ("beam_step", "finished hypotheses extended", "must not grow"),
    ("beam_step", "finished hypotheses dropped", "do not throw finished"),
    ("beam_step", "best continuations per hypothesis", "over ALL n * V"),
    ("beam_step", "scores not cumulative", "PLUS the new token"),
    ("length_penalized_score", "probabilities summed", "[D1]"),
    ("length_penalized_score", "probabilities multiplied", "underflows"),
    ("length_penalized_score", "no length penalty", "divide the sum by L ** alpha"),
    ("length_penalized_score", "multiplied by the length", "lifts long hypotheses"),
    ("length_penalized_score", "always the mean", "the exponent alpha matters"),
]


@pytest.mark.parametrize("name, pitfall, hint", EXPECTED, ids=[f"{n}-{p}" for n, p, _ in EXPECTED])
def test_each_buggy_variant_fails_with_its_hint(capsys, name, pitfall, hint):
    variant = next(p.variant for p in EXERCISES[name].pitfalls if p.name == pitfall)
    ok, out = run(capsys, name, variant)
    assert ok is False
    assert out.startswith(f"❌ {name}:")
    assert hint in out, out


def test_every_pitfall_is_listed_here():
    listed = {(n, p) for n, p, _ in EXPECTED}
    assert listed == {(n, p.name) for n in NAMES for p in EXERCISES[n].pitfalls}


@pytest.mark.parametrize("name", NAMES)
def test_untouched_stubs_are_not_attempted(capsys, name):
    def stub(*args):
        raise NotImplementedError("your code here")

    ok, out = run(capsys, name, stub)
    assert ok is False and "not attempted yet" in out
    ok, out = run(capsys, name, lambda *args: None)
    assert ok is False and "not attempted yet" in out


def test_solutions_print_the_reference(capsys):
    solution("beam_step")
    assert "def beam_step" in capsys.readouterr().out
    solution("length_penalized_score")
    assert "log_probs.shape[-1] ** alpha" in capsys.readouterr().out


def test_a_plain_float_score_is_accepted(capsys):
    ok, _ = run(capsys, "length_penalized_score",
                lambda lp, alpha: float(lp.sum()) / len(lp) ** alpha)
    assert ok is True


def test_beam_step_by_hand():
    sums = torch.tensor([-1.0, -0.5])
    log_probs = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]))
    rows, tokens, scores = beam_step(sums, log_probs, torch.tensor([False, True]), 2, eos_id=2)
    # the finished hypothesis (row 1) stays at -0.5; row 0's best token 0 gives -1 + log 0.5
    assert rows.tolist() == [1, 0] and tokens.tolist() == [2, 0]
    torch.testing.assert_close(scores, torch.tensor([-0.5, -1.0 + torch.log(torch.tensor(0.5))]))


def test_length_penalized_score_by_hand():
    log_probs = torch.tensor([-1.0, -2.0, -3.0, -2.0])
    assert length_penalized_score(log_probs, 0.0).item() == pytest.approx(-8.0)
    assert length_penalized_score(log_probs, 1.0).item() == pytest.approx(-2.0)
    assert length_penalized_score(log_probs, 0.5).item() == pytest.approx(-4.0)


def test_beam_step_first_step_is_a_plain_topk():
    log_probs = torch.randn(1, 11).log_softmax(-1)
    rows, tokens, scores = beam_step(torch.zeros(1), log_probs, torch.tensor([False]), 4, 2)
    top = log_probs[0].topk(4)
    assert rows.tolist() == [0] * 4 and tokens.tolist() == top.indices.tolist()
    torch.testing.assert_close(scores, top.values)
