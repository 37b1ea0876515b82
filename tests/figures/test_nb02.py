"""Figures of notebook 02 (positional encoding), drawn without widgets at every slider extreme."""

import math

import numpy as np
import pytest
from matplotlib.image import AxesImage
from matplotlib.patches import Rectangle

from helpers.figures import (
    plot_pe_rotation,
    plot_pe_similarity,
    plot_pe_wavelengths,
    plot_positional_encoding,
)
from helpers.positional import sinusoidal_encoding


def _image(ax) -> AxesImage:
    images = [child for child in ax.get_children() if isinstance(child, AxesImage)]
    assert len(images) == 1
    return images[0]


# The widget's slider ranges: positions 8..200, d_model 2..128 (even), base 10..10000.
@pytest.mark.parametrize("n, d_model, base, position", [
    (64, 64, 10000.0, 20),   # the notebook's defaults
    (8, 2, 10.0, 0),         # smallest table, first position
    (200, 128, 10000.0, 199),  # largest table, last position
    (37, 6, 100.0, 36),
])
def test_explorer_draws_the_table_and_the_chosen_row(n, d_model, base, position):
    pe = sinusoidal_encoding(n, d_model, base)
    fig = plot_positional_encoding(pe, position)
    ax_map, ax_vec = fig.axes[:2]
    image = _image(ax_map)
    assert np.allclose(image.get_array(), pe.numpy())
    assert image.get_clim() == (-1, 1)  # diverging palette centred on 0
    outlines = [p for p in ax_map.patches if isinstance(p, Rectangle)]
    assert len(outlines) == 1 and outlines[0].get_y() == pytest.approx(position - 0.5)
    line = ax_vec.get_lines()[0]
    assert np.allclose(line.get_ydata(), pe[position].numpy())
    sin_points, cos_points = ax_vec.collections[:2]
    assert np.allclose(sin_points.get_offsets()[:, 1], pe[position, 0::2].numpy())
    assert np.allclose(cos_points.get_offsets()[:, 1], pe[position, 1::2].numpy())
    assert str(position) in ax_map.get_title() and str(n) in ax_map.get_title()
    # every tick label on the column axis is a whole number, whatever d_model is
    fig.canvas.draw()
    ticks = [t for t in ax_vec.get_xticks() if -0.5 <= t <= d_model - 0.5]
    assert ticks and all(float(t).is_integer() for t in ticks)


def test_explorer_without_a_position_has_only_the_heatmap():
    pe = sinusoidal_encoding(10, 4)
    fig = plot_positional_encoding(pe)
    assert len(fig.axes) == 2  # the heatmap and its colour bar
    assert np.allclose(_image(fig.axes[0]).get_array(), pe.numpy())


@pytest.mark.parametrize("bad", [-1, 10])
def test_explorer_rejects_a_position_outside_the_table(bad):
    with pytest.raises(ValueError, match="position"):
        plot_positional_encoding(sinusoidal_encoding(10, 4), bad)


def test_wavelengths_on_a_log_scale_between_the_bounds():
    d_model, base = 64, 10000.0
    wavelengths = [2 * math.pi * base ** (2 * i / d_model) for i in range(d_model // 2)]
    fig = plot_pe_wavelengths(wavelengths, base)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    curve, lower, upper = ax.get_lines()[:3]
    assert np.allclose(curve.get_ydata(), wavelengths)
    assert lower.get_ydata()[0] == pytest.approx(2 * math.pi)
    assert upper.get_ydata()[0] == pytest.approx(2 * math.pi * base)
    assert f"d_model = {d_model}" in ax.get_title()


def test_similarity_rows_against_the_offset():
    pe = sinusoidal_encoding(120, 32)
    sim = pe @ pe.T
    anchors, max_offset = [30, 60, 89], 30
    fig = plot_pe_similarity(sim, anchors, max_offset)
    ax_map, ax_line = fig.axes[:2]
    image = _image(ax_map)
    assert np.allclose(image.get_array(), sim.numpy())
    low, high = image.get_clim()
    assert low == pytest.approx(-high)  # centred on 0
    curves = ax_line.get_lines()[:len(anchors)]
    for p, curve in zip(anchors, curves, strict=True):
        assert np.array_equal(curve.get_xdata(), np.arange(-max_offset, max_offset + 1))
        assert np.allclose(curve.get_ydata(), sim[p, p - max_offset:p + max_offset + 1].numpy())


def test_similarity_rejects_anchors_too_close_to_the_edge():
    sim = sinusoidal_encoding(50, 8) @ sinusoidal_encoding(50, 8).T
    with pytest.raises(ValueError, match="anchor"):
        plot_pe_similarity(sim, [10], 20)


def test_rotation_points_lie_on_the_circle_and_arrows_join_p_to_p_plus_k():
    pe = sinusoidal_encoding(20, 16)
    k, starts, pairs = 2, [0, 4, 9], (0, 1)
    fig = plot_pe_rotation(pe, k, starts, pairs)
    panels = fig.axes[:len(pairs)]
    for ax, i in zip(panels, pairs, strict=True):
        points = ax.collections[0].get_offsets()
        assert np.allclose(points, pe[:, 2 * i:2 * i + 2].numpy())
        assert np.allclose(np.hypot(points[:, 0], points[:, 1]), 1.0, atol=1e-6)
        arrows = [child for child in ax.texts if child.get_text() == ""]
        assert len(arrows) == len(starts)
        for p, arrow in zip(starts, arrows, strict=True):
            assert np.allclose(arrow.xy, pe[p + k, 2 * i:2 * i + 2].numpy())
            assert np.allclose(arrow.xyann, pe[p, 2 * i:2 * i + 2].numpy())


def test_rotation_rejects_bad_pairs_and_starts():
    pe = sinusoidal_encoding(20, 4)
    with pytest.raises(ValueError, match="pair"):
        plot_pe_rotation(pe, 1, [0], pairs=(2,))
    with pytest.raises(ValueError, match="start"):
        plot_pe_rotation(pe, 3, [18])
