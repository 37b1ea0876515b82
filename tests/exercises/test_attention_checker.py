"""The class-level checker of notebook 03: ``check("multi_head_attention", MyClass)`` loads the
reference's weights into the learner's module and compares outputs."""

import math

import pytest
import torch
from torch import nn

from helpers.attention import MultiHeadAttention


class EinsumAttention(MultiHeadAttention):
    """A correct forward written differently: einsum over an explicit head axis, no helpers."""

    def forward(self, query, key, value, mask=None):
        h, d_k = self.num_heads, self.d_k
        q = self.w_q(query).unflatten(-1, (h, d_k))  # (B, Lq, h, d_k)
        k = self.w_k(key).unflatten(-1, (h, d_k))
        v = self.w_v(value).unflatten(-1, (h, d_k))
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1).nan_to_num(0.0)
        return self.w_o(torch.einsum("bhqk,bkhd->bqhd", weights, v).flatten(-2))


class FromScratch(nn.Module):
    """The notebook's own __init__ (not a subclass of the reference) with a correct forward."""

    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))
        self.dropout = nn.Dropout(dropout)

    forward = EinsumAttention.forward


def test_reference_and_independent_answers_pass(run_check):
    for cls in (MultiHeadAttention, EinsumAttention, FromScratch):
        ok, out = run_check("multi_head_attention", cls)
        assert ok is True, out


def test_misnamed_submodules_are_reported_with_what_to_keep(run_check):
    class Renamed(FromScratch):
        def __init__(self, d_model, num_heads, dropout=0.0):
            super().__init__(d_model, num_heads, dropout)
            self.out = self.w_o
            del self.w_o

    ok, out = run_check("multi_head_attention", Renamed)
    assert ok is False
    assert ("keep the __init__ the notebook gives: yours lacks w_o.weight, w_o.bias; has "
            "out.weight, out.bias") in out


@pytest.mark.parametrize("given", [EinsumAttention(24, 4), EinsumAttention.forward, 42])
def test_an_instance_or_a_function_is_not_a_class(run_check, given):
    ok, out = run_check("multi_head_attention", given)
    assert ok is False and "check expects your class itself" in out


def test_the_global_random_state_is_untouched(run_check):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    run_check("multi_head_attention", EinsumAttention)
    assert torch.equal(torch.rand(3), expected)
