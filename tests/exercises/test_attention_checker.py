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
        self.attention_weights = weights  # the figures after the check plot them
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


def test_a_right_answer_must_keep_its_weights_for_the_figures(run_check):
    class NoWeights(EinsumAttention):
        def forward(self, query, key, value, mask=None):
            out = EinsumAttention.forward(self, query, key, value, mask)
            del self.attention_weights
            return out

    ok, out = run_check("multi_head_attention", NoWeights)
    assert ok is False and "right outputs, but keep the heads' weights" in out


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


def test_lower_slips_are_carried_into_multi_head_attention():
    """Notebook 01's attention slips run inside multi-head attention through its ``attend`` hook,
    notebook 03's split and merge slips through ``names``: no second copy of the forward."""
    from helpers.exercises.engine import lookup
    from helpers.exercises.nb01 import ATTENTION_SLIPS
    carried = {p.name: p.variant for p in lookup("multi_head_attention").pitfalls}
    attention = {p.name: p.variant for p in ATTENTION_SLIPS}
    for name in ("no scaling", "inverted mask", "softmax over the queries"):
        assert carried[name].attend is attention[name]
        assert carried[name].forward is MultiHeadAttention.forward
    assert {"view(B, h, L, d_k) without transpose",
            "reshape without transposing back"} <= set(carried)


def test_shared_case_builders():
    from helpers.exercises.cases import causal, random_mask, seeded, with_random_norms
    from helpers.layers import EncoderLayer
    torch.manual_seed(5)
    expected = torch.rand(2)
    torch.manual_seed(5)
    first = seeded(0, nn.Linear, 3, 2)
    assert torch.equal(torch.rand(2), expected)  # the global random state is untouched
    assert torch.equal(first.weight, seeded(0, nn.Linear, 3, 2).weight) and not first.training
    mask = random_mask(torch.Generator().manual_seed(0), 3, 4, 5)
    assert mask.any(-1).all() and not mask[..., -1].any()
    assert torch.equal(causal(3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]]).bool())
    layer = with_random_norms(EncoderLayer)(d_model=8, num_heads=2, d_ff=16, dropout=0.0)
    assert isinstance(layer, EncoderLayer) and layer.norm1.weight.std() > 0.05
    assert not torch.equal(layer.norm1.weight, layer.norm2.weight)
