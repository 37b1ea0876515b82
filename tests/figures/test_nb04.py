"""Figures of notebook 04 (Add & Norm), checked without widgets: what each one draws."""

import matplotlib.colors as mcolors
import numpy as np
import pytest
import torch

from helpers.figures import (
    gradient_norms_figure,
    layer_norm_rows_figure,
    norm_placement_figure,
    post_vs_pre_norm_figure,
    training_curves_figure,
)
from helpers.figures.style import NORM_COLOURS


def _labelled_lines(ax):
    return {line.get_label(): line for line in ax.get_lines()
            if not line.get_label().startswith("_")}


def test_layer_norm_rows_draw_every_feature_of_every_token():
    before = torch.randn(4, 10) * torch.tensor([[0.5], [3.0], [1.0], [2.0]]) + 5
    after = torch.nn.functional.layer_norm(before, (10,))
    fig = layer_norm_rows_figure(before, after, token_labels=["a", "b", "c", "d"])
    assert len(fig.axes) == 2
    for ax, data in zip(fig.axes, (before, after), strict=True):
        dots = ax.collections
        assert len(dots) == 4  # one scatter per token
        for i, collection in enumerate(dots):
            xs, ys = collection.get_offsets().T
            np.testing.assert_allclose(np.sort(xs), np.sort(data[i].numpy()), rtol=1e-6)
            assert np.all(np.abs(ys - i) < 0.5)  # the jitter keeps each token on its own row
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["a", "b", "c", "d"]


def test_layer_norm_rows_mark_mean_and_spread():
    before = np.array([[2.0, 6.0, 2.0, 6.0], [1.0, 3.0, 3.0, 9.0]])
    fig = layer_norm_rows_figure(before, before)
    lines = fig.axes[0].get_lines()
    spans = [line for line in lines if len(line.get_xdata()) == 2 and line.get_linewidth() == 6]
    assert [tuple(line.get_xdata()) for line in spans] == [(2.0, 6.0), (1.0, 7.0)]  # mean ± std
    means = [line for line in lines if line.get_linestyle() == "--"]
    assert [line.get_xdata()[0] for line in means] == [4.0, 4.0]


def test_gradient_norms_figure_plots_each_series_per_layer_on_a_log_axis():
    norms = {"without residual": torch.logspace(-8, -1, 30),
             "with residual": torch.full((30,), 5.0)}
    fig = gradient_norms_figure(norms, title="deep stack")
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    assert ax.get_title() == "deep stack"
    lines = _labelled_lines(ax)
    assert set(lines) == set(norms)
    for label, values in norms.items():
        np.testing.assert_array_equal(lines[label].get_xdata(), np.arange(1, 31))
        np.testing.assert_allclose(lines[label].get_ydata(), values.numpy(), rtol=1e-6)
        assert mcolors.same_color(lines[label].get_color(), NORM_COLOURS[label])


def test_post_vs_pre_norm_figure_has_gradients_left_and_stream_size_right():
    grads = {"post-norm": np.linspace(0.5, 1.5, 12), "pre-norm": np.linspace(0.8, 0.4, 12)}
    sizes = {"post-norm": np.ones(12), "pre-norm": np.linspace(1.2, 2.4, 12)}
    fig = post_vs_pre_norm_figure(grads, sizes)
    left, right = fig.axes
    for ax, series in ((left, grads), (right, sizes)):
        lines = _labelled_lines(ax)
        assert set(lines) == {"post-norm", "pre-norm"}
        for label, values in series.items():
            np.testing.assert_allclose(lines[label].get_ydata(), values)
            assert mcolors.same_color(lines[label].get_color(), NORM_COLOURS[label])
        assert ax.get_ylim()[0] == 0  # sizes are compared from zero
    assert "gradient" in left.get_title() and "residual stream" in right.get_title()


@pytest.mark.parametrize("depth", [2, 48])
def test_post_vs_pre_norm_figure_reads_at_the_slider_ends(depth):
    values = {"post-norm": np.ones(depth), "pre-norm": np.arange(1, depth + 1) / depth}
    fig = post_vs_pre_norm_figure(values, values)
    for ax in fig.axes:
        ticks = [t for t in ax.get_xticks() if 1 <= t <= depth]
        assert 2 <= len(ticks) <= 13  # integer ticks, never one per layer at depth 48
        assert all(float(t).is_integer() for t in ticks)


def _text_y(ax, text):
    ys = [t.get_position()[1] for t in ax.texts if t.get_text() == text]
    assert len(ys) == 1, f"expected one {text!r} label"
    return ys[0]


def test_norm_placement_figure_puts_layernorm_after_or_before_the_sublayer():
    post, pre = norm_placement_figure().axes
    assert "post-norm" in post.get_title() and "LayerNorm(x + Sublayer(x))" in post.get_title()
    assert "pre-norm" in pre.get_title() and "x + Sublayer(LayerNorm(x))" in pre.get_title()
    # Drawn from the input (bottom) to the output (top).
    assert _text_y(post, "Sublayer") < _text_y(post, "+") < _text_y(post, "LayerNorm")
    assert _text_y(pre, "LayerNorm") < _text_y(pre, "Sublayer") < _text_y(pre, "+")
    for ax in (post, pre):
        assert _text_y(ax, "x (input)") < _text_y(ax, "Sublayer") < _text_y(ax, "output")
        assert any("residual" in t.get_text() for t in ax.texts)


def test_training_curves_figure_draws_each_run_per_step():
    curves = {"post-norm": [0.6, 0.5, 0.5], "pre-norm": torch.tensor([0.6, 0.1, 0.01]),
              "post-norm + warm-up": np.array([0.6, 0.2, 0.001])}
    fig = training_curves_figure(curves, title="toy")
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    lines = _labelled_lines(ax)
    assert list(lines) == list(curves)
    for label, losses in curves.items():
        np.testing.assert_array_equal(lines[label].get_xdata(), [1, 2, 3])
        np.testing.assert_allclose(lines[label].get_ydata(), np.asarray(losses, dtype=float),
                                   rtol=1e-6)
    # A variant keeps its layout's colour and is told apart by the line style.
    assert mcolors.same_color(lines["post-norm + warm-up"].get_color(), NORM_COLOURS["post-norm"])
    assert lines["post-norm + warm-up"].get_linestyle() != lines["post-norm"].get_linestyle()


def test_several_runs_draw_the_median_and_a_min_max_band():
    runs = np.array([[0.6, 0.5, 0.4], [0.8, 0.2, 0.1], [0.7, 0.3, 0.3]])  # (3 runs, 3 steps)
    fig = training_curves_figure({"pre-norm": runs, "post-norm": runs[0]})
    ax = fig.axes[0]
    lines = _labelled_lines(ax)
    assert list(lines) == ["pre-norm (median of 3)", "post-norm"]
    np.testing.assert_allclose(lines["pre-norm (median of 3)"].get_ydata(), [0.7, 0.3, 0.3])
    (band,) = ax.collections  # one band, for the entry with several runs
    vertices = band.get_paths()[0].vertices
    assert np.isclose(vertices[:, 1].min(), 0.1) and np.isclose(vertices[:, 1].max(), 0.8)
    assert mcolors.same_color(band.get_facecolor()[0][:3], lines["pre-norm (median of 3)"]
                              .get_color())
