"""Figures of notebook 01 (attention), checked without widgets: the values behind each figure."""

import numpy as np
import pytest
import torch
from matplotlib.colors import to_hex

from helpers.figures import (
    SATURATION_D_K,
    masked_attention_heatmap,
    softmax_saturation_data,
    softmax_saturation_figure,
)
from helpers.figures.style import BLOCKED


def _bar_heights(ax):
    return [np.array([bar.get_height() for bar in container]) for container in ax.containers]


@pytest.mark.parametrize("d_k", [1, 7, 64, 1024])
def test_saturation_bars_are_sorted_softmax_rows(d_k):
    fig = softmax_saturation_figure(d_k, num_keys=10)
    unscaled, scaled = _bar_heights(fig.axes[0])
    for heights in (unscaled, scaled):
        assert len(heights) == 10
        assert heights.sum() == pytest.approx(1.0, abs=1e-9)
        assert np.all(heights >= 0)
        assert np.all(np.diff(heights) <= 0), "bars must be sorted from largest to smallest"


def test_saturation_scaling_changes_nothing_when_d_k_is_1():
    data = softmax_saturation_data(1)
    np.testing.assert_array_equal(data["unscaled"], data["scaled"])
    assert data["max_unscaled"][0] == data["max_scaled"][0]


def test_unscaled_softmax_saturates_and_scaled_does_not():
    data = softmax_saturation_data(1024)
    assert data["unscaled"][0] > 0.9  # nearly one-hot
    assert data["scaled"][0] < 0.6
    # The unscaled curve climbs towards 1, the scaled one stays flat far from 1.
    assert np.all(np.diff(data["max_unscaled"]) > -0.02)
    assert data["max_unscaled"][-1] > 0.9
    assert data["max_scaled"].max() - data["max_scaled"].min() < 0.15
    assert data["max_scaled"].max() < 0.5
    # Every d_k above 1: the unscaled rows are peakier on average.
    assert np.all(data["max_unscaled"][1:] > data["max_scaled"][1:])


def test_saturation_curves_are_plotted_and_do_not_move_with_d_k():
    figures = [softmax_saturation_figure(d_k) for d_k in (2, 256)]
    lines = [[line.get_ydata() for line in fig.axes[1].lines[:2]] for fig in figures]
    np.testing.assert_array_equal(lines[0][0], lines[1][0])
    np.testing.assert_array_equal(lines[0][1], lines[1][1])
    data = softmax_saturation_data(2)
    np.testing.assert_allclose(lines[0][0], data["max_unscaled"])
    np.testing.assert_allclose(lines[0][1], data["max_scaled"])
    np.testing.assert_array_equal(figures[0].axes[1].lines[0].get_xdata(), SATURATION_D_K)
    # The dashed marker sits at the chosen d_k.
    assert figures[1].axes[1].lines[-1].get_xdata()[0] == 256


def test_saturation_data_is_deterministic_and_seeded():
    a, b = softmax_saturation_data(32), softmax_saturation_data(32)
    c = softmax_saturation_data(32, seed=1)
    np.testing.assert_array_equal(a["unscaled"], b["unscaled"])
    assert not np.array_equal(a["unscaled"], c["unscaled"])


def test_masked_heatmap_crosses_out_blocked_cells_and_keeps_the_other_weights():
    weights = torch.tensor([[0.25, 0.0, 0.75], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[True, False, True], [False, False, False]])
    fig = masked_attention_heatmap(weights, mask, ["x", "y", "z"], ["a", "b"], title="t")
    ax = fig.axes[0]
    texts = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text()
             for t in ax.texts}
    assert texts == {(0, 0): "0.25", (0, 1): "×", (0, 2): "0.75",
                     (1, 0): "×", (1, 1): "×", (1, 2): "×"}
    image = ax.images[0]
    np.testing.assert_array_equal(np.ma.getmaskarray(image.get_array()), ~mask.numpy())
    assert to_hex(image.cmap.get_bad()) == BLOCKED  # the course's one grey for blocked cells
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y", "z"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    assert ax.get_title() == "t"


def test_masked_heatmap_broadcasts_a_key_mask_over_the_rows():
    weights = np.array([[0.5, 0.0, 0.5], [0.1, 0.0, 0.9]])
    fig = masked_attention_heatmap(weights, np.array([True, False, True]))
    texts = sorted(t.get_text() for t in fig.axes[0].texts)
    assert texts == sorted(["0.50", "0.50", "0.10", "0.90", "×", "×"])
