"""Figures of notebook 07 (decoder), checked without widgets: the values behind each figure."""

import numpy as np
import pytest
import torch
from matplotlib.patches import Rectangle

from helpers.figures import decoder_loss_curves_figure, decoder_step_figure
from helpers.masks import causal_mask

TGT = ["<bos>", "bee", "owl", "fox", "dog", "cat"]  # T = 6
SRC = ["cat", "dog", "fox", "owl", "bee"]  # S = 5



def _weights(T=6, S=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(T, S, generator=g).softmax(dim=-1)  # rows sum to 1, like attention


def _frames(ax):
    """Unfilled rectangles drawn on ``ax``: the frame around row t."""
    return [p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]


@pytest.mark.parametrize("t", range(6))
def test_highlighted_cells_are_positions_0_to_t(t):
    fig = decoder_step_figure(t, causal_mask(6), _weights(), TGT, SRC)
    grid = np.asarray(fig.axes[0].images[0].get_array())
    highlighted = np.argwhere(grid == 2)
    assert highlighted.tolist() == [[t, s] for s in range(t + 1)]  # row t, columns 0..t
    allowed = np.tril(np.ones((6, 6), bool))
    np.testing.assert_array_equal(grid > 0, allowed)  # the rest of the mask is drawn as it is
    visible = ", ".join(str(s) for s in range(t + 1))
    assert f"position {t} may see {visible}" in fig.axes[0].get_title()


@pytest.mark.parametrize("t", [0, 3, 5])
def test_cross_attention_row_drawn_is_weights_row_t(t):
    weights = _weights()
    fig = decoder_step_figure(t, causal_mask(6), weights, TGT, SRC)
    right = fig.axes[1]
    np.testing.assert_allclose(np.asarray(right.images[0].get_array()), weights.numpy())
    written = [float(text.get_text()) for text in right.texts]
    np.testing.assert_allclose(written, weights[t].numpy(), atol=0.005)  # row t, written out
    assert [round(text.get_position()[1]) for text in right.texts] == [t] * 5
    faded = [p for p in right.patches if isinstance(p, Rectangle) and p.get_fill()]
    assert sorted(round(p.get_y() + 0.5) for p in faded) == [i for i in range(6) if i != t]
    for ax in fig.axes[:2]:  # row t framed in both panels
        (frame,) = _frames(ax)
        assert frame.get_y() == pytest.approx(t - 0.5) and frame.get_height() == 1


@pytest.mark.parametrize("t", [0, 2, 5])
def test_title_carries_t_and_the_input_token(t):
    fig = decoder_step_figure(t, causal_mask(6), _weights(), TGT, SRC)
    title = fig.get_suptitle()
    assert f"t = {t}" in title and f"'{TGT[t]}'" in title
    assert f"position {t}" in fig.axes[1].get_title()


def test_labels_on_both_panels():
    fig = decoder_step_figure(1, causal_mask(6), _weights(), TGT, SRC)
    left, right = fig.axes[:2]
    assert [t.get_text() for t in left.get_xticklabels()] == TGT
    assert [t.get_text() for t in right.get_xticklabels()] == SRC
    assert [t.get_text() for t in right.get_yticklabels()] == [f"{i}: {w}" for i, w in
                                                                enumerate(TGT)]


def test_a_mask_other_than_causal_is_drawn_as_given():
    """No look-ahead mask: position 1 may see every position."""
    mask = torch.ones(6, 6, dtype=torch.bool)
    fig = decoder_step_figure(1, mask, _weights(), TGT, SRC)
    grid = np.asarray(fig.axes[0].images[0].get_array())
    assert (grid[1] == 2).all() and (np.delete(grid, 1, axis=0) == 1).all()
    assert "may see 0, 1, 2, 3, 4, 5" in fig.axes[0].get_title()


def test_accepts_batched_tensors_with_leading_ones():
    fig = decoder_step_figure(2, causal_mask(6)[None, None], _weights()[None], TGT, SRC)
    assert np.asarray(fig.axes[1].images[0].get_array()).shape == (6, 5)


@pytest.mark.parametrize("kwargs, match", [
    ({"t": 6}, "t must be in 0..5"),
    ({"t": -1}, "t must be in 0..5"),
    ({"self_mask": causal_mask(5)}, r"self_mask must be \(T, T\)"),
    ({"src_labels": SRC[:4]}, "need 6 target and 5 source labels"),
])
def test_bad_arguments_raise_clear_errors(kwargs, match):
    args = {"t": 0, "self_mask": causal_mask(6), "cross_weights": _weights(),
            "tgt_labels": TGT, "src_labels": SRC, **kwargs}
    with pytest.raises(ValueError, match=match):
        decoder_step_figure(**args)


def test_loss_curves_draw_each_series():
    curves = {"no shift": [2.5, 0.5, 0.01], "shifted": [2.6, 1.0, 0.05, 0.02]}
    fig = decoder_loss_curves_figure(curves, title="losses")
    lines = fig.axes[0].get_lines()
    assert [line.get_label() for line in lines] == list(curves)
    for line, losses in zip(lines, curves.values(), strict=True):
        np.testing.assert_allclose(line.get_ydata(), losses)
        np.testing.assert_array_equal(line.get_xdata(), np.arange(1, len(losses) + 1))
    assert fig.axes[0].get_yscale() == "log" and fig.axes[0].get_title() == "losses"
