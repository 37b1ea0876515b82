"""The drawings of notebook 05 (embedding scale, attention of every layer and head)."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from helpers.plotting import embedding_scale_figure, encoder_attention_grid


def test_embedding_scale_figure_draws_each_series_and_the_reference():
    d_models = [16, 64, 256]
    series = {"small": [d ** -0.5 for d in d_models], "scaled": [1.0, 1.0, 1.0],
              "loud": [d ** 0.5 for d in d_models]}
    fig = embedding_scale_figure(d_models, series, pe_rms=2 ** -0.5)
    try:
        ax = fig.axes[0]
        lines = {line.get_label(): line for line in ax.get_lines()}
        for label, values in series.items():
            np.testing.assert_allclose(lines[label].get_xdata(), d_models)
            np.testing.assert_allclose(lines[label].get_ydata(), values)
        reference = [line for label, line in lines.items() if label.startswith("positional")]
        assert len(reference) == 1
        np.testing.assert_allclose(reference[0].get_ydata(), 2 ** -0.5)
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        # every drawn value lies inside the visible range
        low, high = ax.get_ylim()
        assert low <= 16 ** -0.5 and high >= 256 ** 0.5
        assert [t.get_text() for t in ax.get_xticklabels()] == ["16", "64", "256"]
    finally:
        plt.close(fig)


def test_encoder_attention_grid_one_panel_per_layer_and_head():
    weights = torch.softmax(torch.randn(2, 3, 4, 4), dim=-1)
    weights[..., 3] = 0.0  # a masked key
    tokens = ["a", "b", "c", "<pad>"]
    fig = encoder_attention_grid(weights, tokens, title="t")
    try:
        assert len(fig.axes) == 2 * 4  # 3 heads + the colour bar column, per layer
        titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
        assert titles == ["head 0", "head 1", "head 2"]
        grid = np.array(fig.axes).reshape(2, 4)
        for layer in range(2):
            for head in range(3):
                drawn = grid[layer, head].collections[0].get_array()
                expected = np.ma.masked_equal(weights[layer, head].numpy(), 0.0)
                np.testing.assert_allclose(np.ma.filled(drawn, -1).reshape(4, 4),
                                           np.ma.filled(expected, -1), atol=1e-6)
                # the masked key column is not coloured: the grey background shows
                assert np.ma.getmaskarray(drawn).reshape(4, 4)[:, 3].all()
        assert [t.get_text() for t in grid[1, 0].get_xticklabels()] == tokens
        assert [t.get_text() for t in grid[0, 0].get_yticklabels()] == tokens
        assert grid[0, 0].get_ylabel().startswith("layer 0")
        assert grid[1, 0].get_ylabel().startswith("layer 1")
    finally:
        plt.close(fig)
