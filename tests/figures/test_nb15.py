"""The drawings of notebook 15 (the two positional layouts, the feed-forward activations)."""

import numpy as np
import pytest
import torch
from matplotlib.image import AxesImage

from helpers.figures import activation_figure, positional_layouts_figure
from helpers.positional import sinusoidal_encoding


def _images(ax):
    return [child for child in ax.get_children() if isinstance(child, AxesImage)]


@pytest.mark.parametrize("n, d_model", [(50, 64), (6, 2), (9, 10)])
def test_the_two_layouts_side_by_side_with_their_sine_columns(n, d_model):
    paper = sinusoidal_encoding(n, d_model)
    halves = sinusoidal_encoding(n, d_model, interleaved=False)
    fig = positional_layouts_figure(paper, halves)
    (left, right), (left_strip, right_strip) = np.array(fig.axes[:4]).reshape(2, 2)
    for ax, table in ((left, paper), (right, halves)):
        image = _images(ax)[0]
        assert np.allclose(image.get_array(), table.numpy())
        assert image.get_clim() == (-1, 1)
    # the strips: 0 for a sine column, 1 for a cosine column
    assert _images(left_strip)[0].get_array()[0].tolist() == [i % 2 for i in range(d_model)]
    assert _images(right_strip)[0].get_array()[0].tolist() == [
        int(i >= d_model // 2) for i in range(d_model)]
    assert "interleaved" in left.get_title() and "Marian" in right.get_title()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["sine column", "cosine column"]


def test_the_layouts_must_have_one_shape():
    with pytest.raises(ValueError, match="the same shape"):
        positional_layouts_figure(sinusoidal_encoding(5, 4), sinusoidal_encoding(6, 4))


def test_the_activations_are_drawn_with_their_labels():
    x = torch.linspace(-5, 5, 101)
    curves = {"ReLU": torch.relu(x), "swish": torch.nn.functional.silu(x)}
    fig = activation_figure(x, curves)
    lines = [line for line in fig.axes[0].get_lines() if len(line.get_xdata()) == len(x)]
    assert [line.get_label() for line in lines] == ["ReLU", "swish"]
    for line, values in zip(lines, curves.values(), strict=True):
        assert np.allclose(line.get_ydata(), values.numpy())
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["ReLU", "swish"]
