"""The generic drawing functions of helpers/figures.py (notebook 00's block).

Each function must return a Figure showing exactly its input, with titles and labels set,
readable ticks on long axes, and no failure at the smallest and large sizes.
"""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from helpers import figures
from helpers.course import ASSETS
from helpers.figures import style

TOKENS = ["the", "cat", "sat", "on", "the", "mat"]



def _weights(*shape):
    return torch.softmax(torch.randn(*shape), dim=-1)


def _shown(ax):
    """The array behind the (single) image of an axes."""
    assert len(ax.images) == 1
    return np.asarray(ax.images[0].get_array())


def _visible_labels(ax, axis):
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [t.get_text() for t in labels if t.get_text()]


# ---- attention_heatmap
def test_attention_heatmap_shows_the_weights_with_labels_and_values():
    w = _weights(6, 6)
    fig = figures.attention_heatmap(w, x_labels=TOKENS, y_labels=TOKENS, title="toy")
    assert isinstance(fig, Figure)
    ax, colorbar = fig.axes
    np.testing.assert_allclose(_shown(ax), w.numpy(), rtol=0, atol=1e-7)
    assert ax.get_title() == "toy"
    assert _visible_labels(ax, "x") == TOKENS and _visible_labels(ax, "y") == TOKENS
    assert ax.get_xlabel() == "key" and ax.get_ylabel() == "query"
    assert colorbar.get_ylabel() == "attention weight"
    assert ax.images[0].norm.vmin == 0 and ax.images[0].norm.vmax == 1  # weights live in [0, 1]
    numbers = [t.get_text() for t in ax.texts]
    assert len(numbers) == 36 and numbers[0] == f"{w[0, 0]:.2f}"  # annotated: small map


def test_attention_heatmap_does_not_annotate_large_maps_and_thins_ticks():
    fig = figures.attention_heatmap(_weights(100, 100))
    ax = fig.axes[0]
    assert len(ax.texts) == 0
    for axis in "xy":
        shown = _visible_labels(ax, axis)
        assert 5 <= len(shown) <= 25
        assert shown[:2] == ["0", "5"]  # a round step
    assert ax.get_xlabel() == "key position" and ax.get_ylabel() == "query position"


def test_attention_heatmap_draws_on_given_axes_and_accepts_numpy():
    fig, ax = plt.subplots()
    w = np.array([[0.25, 0.75], [1.0, 0.0]])
    assert figures.attention_heatmap(w, ax=ax) is fig
    np.testing.assert_array_equal(_shown(ax), w)
    assert len(fig.axes) == 2  # the given axes and its colour bar


@pytest.mark.parametrize("size", [1, 100])
def test_attention_heatmap_extreme_sizes(size):
    fig = figures.attention_heatmap(_weights(size, size), title=f"{size}")
    assert _shown(fig.axes[0]).shape == (size, size)
    fig.canvas.draw()  # laying out must not fail either


def test_attention_heatmap_stretched_scale_and_bad_labels():
    w = _weights(3, 50) * 0.1
    fig = figures.attention_heatmap(w, vmax=None)
    assert fig.axes[0].images[0].norm.vmax == pytest.approx(float(w.max()))
    with pytest.raises(ValueError, match="labels"):
        figures.attention_heatmap(_weights(3, 3), x_labels=["a", "b"])


# ---- attention_heads
def test_attention_heads_grid_one_map_per_head():
    w = _weights(6, 5, 5)
    fig = figures.attention_heads(w, x_labels=TOKENS[:5], max_cols=4)
    maps = [ax for ax in fig.axes if ax.images]
    assert len(maps) == 6 and len(fig.axes) == 7  # 6 heads and one shared colour bar
    for i, ax in enumerate(maps):
        np.testing.assert_allclose(_shown(ax), w[i].numpy(), rtol=0, atol=1e-7)
        assert ax.get_title() == f"head {i}"
        assert _visible_labels(ax, "x") == TOKENS[:5]
    assert fig.axes[-1].get_ylabel() == "attention weight"
    rows = {round(ax.get_position().y0, 3) for ax in maps}
    assert len(rows) == 2  # 4 + 2 in two rows


def test_attention_heads_accepts_a_batch_of_one_and_titles():
    w = _weights(1, 2, 3, 4)
    fig = figures.attention_heads(w, titles=["left", "right"])
    assert [ax.get_title() for ax in fig.axes if ax.images] == ["left", "right"]
    with pytest.raises(ValueError):
        figures.attention_heads(_weights(2, 3, 3, 3))
    with pytest.raises(ValueError):
        figures.attention_heads(_weights(2, 3, 3), titles=["only one"])


def test_mask_heatmap_padding_mask_shape_and_sizes():
    tokens = torch.tensor([[5, 6, 7, 0, 0]])
    fig = figures.mask_heatmap((tokens != 0)[:, None, None, :])  # (1, 1, 1, L) -> one row
    np.testing.assert_array_equal(_shown(fig.axes[0]), [[1, 1, 1, 0, 0]])
    fig = figures.mask_heatmap(torch.ones(1, 1, dtype=torch.bool))
    assert _shown(fig.axes[0]).shape == (1, 1)
    fig = figures.mask_heatmap(torch.ones(100, 100, dtype=torch.bool).tril())
    ax = fig.axes[0]
    assert len(_visible_labels(ax, "x")) <= 25 and len(_visible_labels(ax, "y")) <= 25
    with pytest.raises(ValueError):
        figures.mask_heatmap(torch.ones(2, 3, 3, dtype=torch.bool))


# ---- architecture and recurrence figures
def test_architecture_figure_names_every_block_and_notebook():
    fig = figures.architecture_figure()
    texts = " | ".join(t.get_text() for t in fig.axes[0].texts)
    for block in ["input embedding", "output embedding", "positional\nencoding",
                  "multi-head\nself-attention", "masked multi-head\nself-attention",
                  "cross-attention", "add & norm", "feed-forward", "linear", "softmax", "N ×",
                  "encoder output"]:
        assert block in texts, block
    tags = {t.get_text() for t in fig.axes[0].texts if t.get_bbox_patch() is not None}
    taught = {n for tag in tags for n in tag.split(" · ")}
    assert {"01", "02", "03", "04", "05", "06", "07", "08"} <= taught
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert list(style.BLOCK_COLOURS) == legend[:len(style.BLOCK_COLOURS)]


def test_architecture_asset_is_present_and_small():
    path = ASSETS / "architecture.png"
    assert path.is_file()
    assert path.stat().st_size < 400_000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_recurrence_vs_attention_figure():
    fig = figures.recurrence_vs_attention_figure(n=5)
    ax_rnn, ax_att = fig.axes
    assert len(ax_att.lines) == 25  # every output reads every input
    highlighted = [line for line in ax_att.lines if line.get_linewidth() == 2]
    assert len(highlighted) == 1  # the one-step path from x_1 to position n
    assert "4 steps" in ax_rnn.get_title() and "1 step" in ax_att.get_title()
    with pytest.raises(ValueError):
        figures.recurrence_vs_attention_figure(n=1)
