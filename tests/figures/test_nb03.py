"""The drawings of notebook 03 (head split and merge, per-head weights), tested without widgets."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from helpers.attention import merge_heads, split_heads
from helpers.figures import attention_heads, head_split_figure


def _panels(fig):
    """The head-index arrays behind the three panels (left, stacked heads, merged)."""
    return [np.ma.filled(ax.images[0].get_array().astype(float), np.nan) for ax in fig.axes]


@pytest.mark.parametrize("d_model,num_heads", [(24, 4), (24, 1), (24, 24), (16, 4), (24, 6)])
def test_columns_coloured_by_head(d_model, num_heads):
    d_k = d_model // num_heads
    fig = head_split_figure(d_model, num_heads, seq_len=3)
    try:
        before, stacked, merged = _panels(fig)
        expected = np.tile(np.arange(d_model) // d_k, (3, 1))  # column c -> head c // d_k
        np.testing.assert_array_equal(before, expected)
        np.testing.assert_array_equal(merged, expected)
        # the middle panel: h blocks of d_k columns, one empty (NaN) column between blocks
        assert stacked.shape == (3, num_heads * d_k + num_heads - 1)
        for head in range(num_heads):
            block = stacked[:, head * (d_k + 1): head * (d_k + 1) + d_k]
            assert np.all(block == head)
        assert np.isnan(stacked).sum() == 3 * (num_heads - 1)
        # the middle x ticks name the original column each cell came from
        labels = [int(t.get_text()) for t in fig.axes[1].get_xticklabels()]
        assert labels == list(range(d_model))
    finally:
        plt.close(fig)


def test_picture_agrees_with_split_heads():
    """The colours say what split_heads does: head i of token l holds columns i*d_k..(i+1)*d_k-1."""
    d_model, num_heads, seq_len = 24, 4, 2
    fig = head_split_figure(d_model, num_heads, seq_len)
    try:
        before, _, _ = _panels(fig)
    finally:
        plt.close(fig)
    columns = torch.arange(d_model).float().expand(1, seq_len, d_model)
    heads = split_heads(columns, num_heads)  # (1, h, L, d_k): each entry is its column number
    for head in range(num_heads):
        cols = heads[0, head].long()
        assert np.all(before[:, cols[0].numpy()] == head)
    assert torch.equal(merge_heads(heads), columns)


def test_head_split_figure_rejects_non_divisor():
    with pytest.raises(ValueError, match="divide"):
        head_split_figure(24, 5, 3)


def test_attention_heads_draws_each_head():
    weights = torch.softmax(torch.randn(3, 4, 5), dim=-1)  # (h, Lq, Lk)
    fig = attention_heads(weights, list("vwxyz"), list("abcd"))
    heat = [ax for ax in fig.axes if ax.get_title().startswith("head")]
    assert [ax.get_title() for ax in heat] == ["head 0", "head 1", "head 2"]
    for i, ax in enumerate(heat):
        np.testing.assert_allclose(ax.images[0].get_array(), weights[i].numpy(), atol=1e-6)
        assert [t.get_text() for t in ax.get_xticklabels()] == list("vwxyz")
    assert [t.get_text() for t in heat[0].get_yticklabels()] == list("abcd")


def test_attention_heads_colour_scale():
    weights = torch.full((2, 3, 3), 1 / 3)
    for vmax in (1.0, 0.3):
        fig = attention_heads(weights, list("abc"), list("abc"), vmax=vmax)
        assert fig.axes[0].images[0].get_clim() == (0.0, vmax)
