"""Add & Norm: LayerNorm row by row, gradients through residual paths, post-norm vs pre-norm
(notebook 04)."""

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.patches import Circle, FancyArrowPatch

from .style import BLOCK_COLOURS, NORM_COLOURS, as_array, box, integer_axis, loss_curves_figure


def layer_norm_rows_figure(before, after, token_labels=None):
    """Each token's features ``(tokens, features)`` as dots on a line, before and after
    LayerNorm, with the mean (dashed) and mean ± one standard deviation (shaded) of each."""
    before, after = as_array(before, "before"), as_array(after, "after")
    n = before.shape[0]
    token_labels = token_labels or [f"token {i}" for i in range(n)]
    colours = sns.color_palette("deep", n)
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.55 * n + 1.8), sharey=True)
    jitter = np.random.default_rng(0).uniform(-0.12, 0.12, before.shape)
    for ax, data, title in zip(axes, (before, after), ("before: x", "after: LayerNorm(x)"),
                               strict=True):
        for i in range(n):
            mean, std = data[i].mean(), data[i].std()
            ax.plot([mean - std, mean + std], [i, i], color=colours[i], linewidth=6, alpha=0.25,
                    solid_capstyle="butt")
            ax.scatter(data[i], i + jitter[i], s=22, color=colours[i], zorder=3)
            ax.plot([mean, mean], [i - 0.3, i + 0.3], color="black", linestyle="--", linewidth=1)
        ax.axvline(0, color="grey", linewidth=0.8)
        ax.set(title=title, xlabel="feature value")
    axes[0].set_yticks(range(n), token_labels)
    axes[0].set_ylim(n - 0.5, -0.5)
    axes[1].text(0.99, 0.01, "dashed: mean; shaded: mean ± std", transform=axes[1].transAxes,
                 ha="right", va="bottom", fontsize=8, color="dimgrey")
    fig.tight_layout()
    return fig


def _per_layer_lines(ax, series, ylabel, title=None, log=True):
    """One line per entry of ``series`` (label -> one value per layer); linear axes start at 0."""
    for label, values in series.items():
        values = as_array(values, label, ndim=1)
        ax.plot(np.arange(1, len(values) + 1), values, "o-", markersize=3.5, label=label,
                color=NORM_COLOURS.get(label))
    if log:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set(xlabel="layer (1 = nearest the input)", ylabel=ylabel, title=title)
    integer_axis(ax.xaxis, nbins=12)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9)


def gradient_norms_figure(norms, title=None):
    """The gradient norm reaching each layer, one line per entry of ``norms`` (log scale)."""
    fig, ax = plt.subplots(figsize=(7.5, 4))
    _per_layer_lines(ax, norms, "‖∂loss/∂W‖ (log scale)", title)
    fig.tight_layout()
    return fig


def post_vs_pre_norm_figure(grad_norms, stream_rms):
    """The gradient norm per layer (left) and the RMS of x after it (right), each argument
    mapping "post-norm" and "pre-norm" to one value per layer."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    _per_layer_lines(left, grad_norms, "‖∂loss/∂W₁‖",
                     "gradient reaching each layer at initialisation", log=False)
    _per_layer_lines(right, stream_rms, "RMS of x after the layer", "size of the residual stream x",
                     log=False)
    fig.tight_layout()
    return fig


def _arrow(ax, start, end, **style):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, shrinkA=0,
                                 shrinkB=0, **{"color": "black", **style}))


def _chain(ax, start, steps, end):
    """Arrows up the middle from y = ``start`` through the boxes ``steps`` (y, text, colour)
    to y = ``end``."""
    for y, text, colour in steps:
        _arrow(ax, (0, start), (0, y - 0.3))
        box(ax, 0, y, 1.5, 0.5, text, colour, "round,pad=0.05", fontsize=10, text_colour="black",
            edge="black")
        start = y + 0.3
    _arrow(ax, (0, start), (0, end))


def norm_placement_figure():
    """The two places for LayerNorm in a sub-layer block, input at the bottom: post-norm (the
    paper), ``LayerNorm(x + Sublayer(x))``, and pre-norm, ``x + Sublayer(LayerNorm(x))``."""
    ln, sub = BLOCK_COLOURS["add & norm"], BLOCK_COLOURS["feed-forward"]
    panels = [(False, [(1.4, "Sublayer", sub)], 2.6, [(3.8, "LayerNorm", ln)]),
              (True, [(1.4, "LayerNorm", ln), (2.6, "Sublayer", sub)], 3.8, [])]
    fig, axes = plt.subplots(1, 2, figsize=(9, 5.2))
    for ax, (pre, below, plus, above) in zip(axes, panels, strict=True):  # boxes around "+"
        ax.set(xlim=(-1.6, 1.6), ylim=(-0.4, 5.4), xticks=[], yticks=[])
        ax.spines[:].set_visible(False)
        ax.text(0, -0.25, "x (input)", ha="center", va="center", fontsize=10)
        _chain(ax, 0.0, below, plus - 0.22)
        ax.add_patch(Circle((0, plus), 0.22, facecolor="white", edgecolor="black"))
        ax.text(0, plus, "+", ha="center", va="center", fontsize=14)
        # the residual path: branch off below the first box, go round it, join at "+"
        ax.plot([0, -1.15, -1.15], [0.5, 0.5, plus], color="dimgrey", linestyle="--")
        _arrow(ax, (-1.15, plus), (-0.22, plus), color="dimgrey", linestyle="--")
        ax.text(-1.27, (plus + 0.5) / 2, "residual path (identity)", ha="center", va="center",
                rotation=90, fontsize=9, color="dimgrey")
        _chain(ax, plus + 0.22, above, 4.9)
        ax.text(0, 5.1, "output", ha="center", va="center", fontsize=10)
        ax.set_title("pre-norm: x + Sublayer(LayerNorm(x))" if pre else
                     "post-norm (the paper): LayerNorm(x + Sublayer(x))", fontsize=10)
    fig.tight_layout()
    return fig


def training_curves_figure(curves, title=None):
    """Training loss per step (log scale), one line per entry of ``curves`` (label -> losses)."""
    return loss_curves_figure(curves, "loss (mean squared error, log scale)", (7.5, 4), title,
                              colours=NORM_COLOURS, styles=("-", "-", "--", ":"), layout=None)
