"""Notebook 07's exercises: ``shift_right`` and ``cross_attention``.

The reference passes, each buggy variant fails with its hint, an untouched stub is "not attempted
yet", other correct spellings pass, and the references agree with the modules the course builds
(``DecoderLayer``'s cross-attention in helpers/layers.py).
"""

import pytest
import torch

from helpers.attention import MultiHeadAttention
from helpers.exercises import EXERCISES, check, cross_attention, shift_right
from helpers.masks import padding_mask

NAMES = ["shift_right", "cross_attention"]


def run(capsys, name, fn):
    ok = check(name, fn)
    return ok, capsys.readouterr().out


@pytest.mark.parametrize("name", NAMES)
def test_reference_passes(capsys, name):
    ok, out = run(capsys, name, EXERCISES[name].reference)
    assert ok is True
    assert out.startswith(f"✅ {name}: correct on all")


# (exercise, pitfall name, pitfall id (helpers/pitfalls.py) or None, a piece of the hint
# the learner must see)
EXPECTED = [
    ("shift_right", "no shift", "T1", "shift the target right behind BOS"),
    ("shift_right", "shifted left", None, "shift right, not left"),
    ("shift_right", "first token dropped", None, "drop the last target token, not the first"),
    ("shift_right", "nothing dropped", None, "keep the length T"),
    ("shift_right", "torch.roll", None, "wraps the last token around to position 0"),
    ("cross_attention", "queries from the memory", None, "the arguments are swapped"),
    ("cross_attention", "values from the decoder", None, "the values come from the memory too"),
    ("cross_attention", "memory unused", None, "that is self-attention"),
    ("cross_attention", "memory mask ignored", None, "pass memory_mask to the attention"),
    ("cross_attention", "look-ahead mask on the memory", None,
     "the look-ahead mask belongs to the decoder's self-attention only"),
    ("cross_attention", "inverted memory mask", "A3", "True means may attend"),
    ("cross_attention", "scaled by sqrt(d_model)", "A1",
     "square root of the key dimension of one head"),
]


def test_every_variant_is_listed():
    registered = {(name, p.name) for name in NAMES for p in EXERCISES[name].pitfalls}
    assert registered == {(name, pitfall) for name, pitfall, _, _ in EXPECTED}


@pytest.mark.parametrize("name, pitfall_name, pid, hint", EXPECTED,
                         ids=[f"{n}-{p}" for n, p, _, _ in EXPECTED])
def test_buggy_variant_fails_with_its_hint(capsys, name, pitfall_name, pid, hint):
    pitfall = next(p for p in EXERCISES[name].pitfalls if p.name == pitfall_name)
    assert pitfall.id == pid
    ok, out = run(capsys, name, pitfall.variant)
    assert ok is False
    assert out.startswith(f"❌ {name}: ")
    assert hint in out
    assert (f"Hint [{pid}]: " if pid else "Hint: ") in out


def _stub_raises(*args, **kwargs):
    raise NotImplementedError("your code here")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("stub", [_stub_raises, lambda *args, **kwargs: None,
                                  lambda *args, **kwargs: (None, None)],
                         ids=["raises", "None", "(None, None)"])
def test_untouched_stub_is_not_attempted(capsys, name, stub):
    ok, out = run(capsys, name, stub)
    assert ok is False
    assert out.startswith(f"⏳ {name}: not attempted yet")


# ------------------------------------------------------- other spellings of the answers

def my_shift_right(target, bos_id):
    out = torch.empty_like(target)
    out[:, 0] = bos_id
    out[:, 1:] = target[:, :-1]
    return out


def my_cross_attention(x, memory, w_q, w_k, w_v, memory_mask=None):
    q, k, v = x @ w_q, memory @ w_k, memory @ w_v
    scores = torch.einsum("btd,bsd->bts", q, k) / q.shape[-1] ** 0.5
    if memory_mask is not None:
        scores = scores.masked_fill(~memory_mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def test_other_correct_spellings_pass(capsys):
    assert run(capsys, "shift_right", my_shift_right)[0] is True
    assert run(capsys, "cross_attention", my_cross_attention)[0] is True


@pytest.mark.parametrize("fn, hint", [
    (lambda target, bos_id: target, "[T1]"),  # the target itself, not even a copy
    (lambda target, bos_id: torch.nn.functional.pad(target[:, 1:], (0, 1), value=bos_id),
     "shift right, not left"),
])
def test_other_spellings_of_a_shift_bug_get_its_hint(capsys, fn, hint):
    ok, out = run(capsys, "shift_right", fn)
    assert ok is False and hint in out, out


def test_swapped_cross_attention_written_by_hand_gets_its_hint(capsys):
    """Raw matmuls raise other errors than the variant when S != T; the hint still comes."""
    def swapped(x, memory, w_q, w_k, w_v, memory_mask=None):
        return my_cross_attention(memory, x, w_q, w_k, w_v, memory_mask)

    ok, out = run(capsys, "cross_attention", swapped)
    assert ok is False and "the arguments are swapped" in out, out


def test_causal_mask_on_the_memory_written_with_causal_mask_gets_its_hint(capsys):
    """``causal_mask(T)`` on the memory only runs when S == T; the hint comes anyway."""
    from helpers.masks import causal_mask

    def learner(x, memory, w_q, w_k, w_v, memory_mask=None):
        mask = causal_mask(x.shape[1])
        if memory_mask is not None:
            mask = mask & memory_mask
        return my_cross_attention(x, memory, w_q, w_k, w_v, mask)

    ok, out = run(capsys, "cross_attention", learner)
    assert ok is False and "look-ahead mask belongs to the decoder's self-attention" in out, out


# ------------------------------------------------------- the references agree with helpers

def test_shift_right_puts_bos_first_and_keeps_the_length():
    target = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]])
    got = shift_right(target, bos_id=1)
    assert got.tolist() == [[1, 5, 6, 7], [1, 8, 2, 0]]
    assert got.dtype == target.dtype and torch.equal(target[:, 0], torch.tensor([5, 8]))


def test_cross_attention_is_one_head_of_multi_head_attention():
    """With one head and no biases, MultiHeadAttention(x, memory, memory) is the reference
    followed by W_O."""
    mha = MultiHeadAttention(8, 1, bias=False)
    x, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    mask = padding_mask(torch.tensor([[4, 5, 6, 7, 8], [4, 5, 6, 0, 0]]), pad_id=0)  # (B,1,1,S)
    expected = mha(x, memory, memory, mask)
    out, weights = cross_attention(x, memory, mha.w_q.weight.T, mha.w_k.weight.T,
                                   mha.w_v.weight.T, mask[:, 0])  # (B, 1, S) for one head
    torch.testing.assert_close(mha.w_o(out), expected)
    torch.testing.assert_close(weights, mha.attention_weights[:, 0])
    assert weights.shape == (2, 3, 5) and torch.all(weights[1, :, 3:] == 0)
