"""Notebooks 05 and 07's class checkers: ``check("encoder_layer", MyEncoderLayer)`` and
``check("decoder_layer", MyDecoderLayer)``, against the reference, answers written differently and
the buggy variants."""

import pytest
import torch.nn.functional as F
from torch import nn

from helpers.attention import MultiHeadAttention
from helpers.exercises import engine
from helpers.layers import DecoderLayer, EncoderLayer, FeedForward, LayerNorm


def ln(norm, x):  # the module's own weights, through torch's function
    return F.layer_norm(x, x.shape[-1:], norm.weight, norm.bias, norm.eps)


class NotebookEncoderLayer(nn.Module):
    """The notebook's __init__, and a forward written as a loop over (sub-layer, norm) pairs."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, mask=None):
        sublayers = [(lambda y: self.dropout1(self.self_attn(y, y, y, mask)), self.norm1),
                     (lambda y: self.dropout2(self.feed_forward(y)), self.norm2)]
        for sublayer, norm in sublayers:
            x = x + sublayer(ln(norm, x)) if self.norm_first else ln(norm, x + sublayer(x))
        return x


class LoopDecoderLayer(DecoderLayer):
    """DecoderLayer's __init__ (a subclass), forward as a loop with torch's layer_norm."""

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        steps = [(lambda y: self.self_attn(y, y, y, tgt_mask), self.norm1),
                 (lambda y: self.cross_attn(y, memory, memory, memory_mask), self.norm2),
                 (self.feed_forward, self.norm3)]
        for sublayer, norm in steps:
            x = x + sublayer(ln(norm, x)) if self.norm_first else ln(norm, x + sublayer(x))
        return x


@pytest.mark.parametrize("name, classes", [
    ("encoder_layer", (EncoderLayer, NotebookEncoderLayer)),
    ("decoder_layer", (DecoderLayer, LoopDecoderLayer)),
])
def test_reference_and_answers_written_differently_pass(run_check, name, classes):
    for cls in classes:
        ok, out = run_check(name, cls)
        assert ok is True, out


@pytest.mark.parametrize("name", ["encoder_layer", "decoder_layer"])
def test_both_layouts_are_checked(name):
    layouts = {case.init["norm_first"] for case in engine.lookup(name).cases()}
    assert layouts == {False, True}


def test_decoder_cases_have_different_lengths_and_both_masks():
    cases = engine.lookup("decoder_layer").cases()
    assert any(c.args[0].shape[1] != c.args[1].shape[1] and c.args[3] is not None for c in cases)
    assert all(c.args[2] is not None and not c.args[2].all() for c in cases)  # look-ahead


def test_a_layer_that_ignores_norm_first_gets_l1(run_check):
    class AlwaysPost(NotebookEncoderLayer):
        def forward(self, x, mask=None):
            x = ln(self.norm1, x + self.self_attn(x, x, x, mask))
            return ln(self.norm2, x + self.feed_forward(x))

    ok, out = run_check("encoder_layer", AlwaysPost)
    assert ok is False and "Hint [L1]" in out


def test_a_misnamed_submodule_says_to_keep_the_init(run_check):
    class Renamed(NotebookEncoderLayer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.ffn = self.feed_forward
            del self.feed_forward

    ok, out = run_check("encoder_layer", Renamed)
    assert ok is False and "keep the __init__ the notebook gives: yours lacks feed_forward" in out
