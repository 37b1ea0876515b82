"""Attention maps and masks, drawn in many notebooks: weights blue on a fixed [0, 1] scale (so
maps compare), blocked cells grey."""

import math

import matplotlib.pyplot as plt
import numpy as np

from .style import MASK_COLOURS, as_array, bool_grid, heatmap, legend_patches, new_axes


def _axis_names(ax, x_labels, y_labels):
    ax.set(xlabel="key" if x_labels is not None else "key position",
           ylabel="query" if y_labels is not None else "query position")


def attention_heatmap(weights, x_labels=None, y_labels=None, title=None, ax=None, vmax=1.0,
                      blocked=None):
    """Attention weights ``(Lq, Lk)``: row i is what query i looks at, values printed up to 8 x 8.
    ``vmax=None`` stretches the scale to the largest weight; ``blocked`` cells are grey."""
    weights = as_array(weights, "weights", ndim=2)
    if ax is None:
        fig, ax = new_axes(*weights.shape)
    top = float(weights.max()) if vmax is None else vmax
    image = heatmap(ax, weights, x_labels, y_labels, vmax=top if top > 0 else 1.0,
                    blocked=blocked, annotate=max(weights.shape) <= 8)
    _axis_names(ax, x_labels, y_labels)
    ax.set_title(title)
    ax.figure.colorbar(image, ax=ax, label="attention weight", shrink=0.9)
    return ax.figure


def masked_attention_heatmap(weights, mask, x_labels=None, y_labels=None, title=None):
    """:func:`attention_heatmap` with the cells ``mask`` blocks (False) grey and marked "×"."""
    weights = as_array(weights, "weights", ndim=2)
    blocked = ~np.broadcast_to(as_array(mask, "mask", dtype=bool), weights.shape)
    fig = attention_heatmap(weights, x_labels, y_labels, title=title, blocked=blocked)
    for i, j in zip(*np.nonzero(blocked), strict=True):
        fig.axes[0].text(j, i, "×", ha="center", va="center", fontsize=12, color="dimgrey")
    return fig


def attention_heads(weights, x_labels=None, y_labels=None, titles=None, max_cols=4, vmax=1.0):
    """One map per head of ``(h, Lq, Lk)`` weights, on one colour scale and colour bar."""
    weights = as_array(weights, "weights", ndim=3, hint=" = (h, Lq, Lk)")
    h, Lq, Lk = weights.shape
    if titles is not None and len(titles) != h:
        raise ValueError(f"{len(titles)} titles given for {h} heads")
    cols = max(1, min(h, max_cols))
    rows = math.ceil(h / cols)
    cell = min(max(0.3 * max(Lq, Lk) + 1.2, 2.4), 4.0)
    fig, axes = plt.subplots(rows, cols, figsize=(cols * cell + 1.0, rows * cell + 0.4),
                             layout="constrained", squeeze=False)
    top = float(weights.max()) if vmax is None else vmax
    for i, ax in enumerate(axes.flat):
        if i >= h:
            fig.delaxes(ax)
            continue
        image = heatmap(ax, weights[i], x_labels, y_labels, vmax=top if top > 0 else 1.0,
                        annotate=Lq * Lk <= 64, fontsize=7)
        ax.set_title(titles[i] if titles is not None else f"head {i}")
        _axis_names(ax, x_labels, y_labels)
        if i % cols:  # the same queries as the first map of the row
            ax.set_ylabel("")
            ax.tick_params(labelleft=False)
        if i < h - cols:
            ax.set_xlabel("")
    fig.colorbar(image, ax=axes, label="attention weight", shrink=0.9)
    return fig


def attention_grid_figure(weights, x_labels, y_labels, title=None, blocked=None):
    """Every layer (rows) and head (columns) of ``(num_layers, num_heads, Lq, Lk)`` weights of
    one sentence, on [0, 1]; ``blocked`` ``(Lq, Lk)`` cells (padding, the future) are grey."""
    w = as_array(weights, "weights", ndim=4, hint=" = (num_layers, num_heads, Lq, Lk)")
    num_layers, num_heads, Lq, Lk = w.shape
    cell = min(max(0.26 * max(Lq, Lk) + 0.6, 2.0), 3.6)
    fig, axes = plt.subplots(num_layers, num_heads, squeeze=False, layout="constrained",
                             figsize=(cell * num_heads + 2.6, cell * num_layers + 0.9))
    for (layer, head), ax in np.ndenumerate(axes):
        image = heatmap(ax, w[layer, head], x_labels, y_labels, blocked=blocked)
        ax.set_title(f"layer {layer}, head {head}", fontsize=9)
        if head:
            ax.set_yticklabels([])
        if layer < num_layers - 1:
            ax.set_xticklabels([])
    for layer in range(num_layers):
        axes[layer, 0].set_ylabel("query")
    for head in range(num_heads):
        axes[-1, head].set_xlabel("key")
    fig.colorbar(image, ax=axes, label="attention weight", shrink=0.8)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def mask_heatmap(mask, x_labels=None, y_labels=None, title=None):
    """A boolean mask ``(Lq, Lk)``, True = may attend: which key each query may look at."""
    mask = as_array(mask, "mask", ndim=2, dtype=bool)
    fig, ax = new_axes(*mask.shape, extra_width=1.2)  # room for the legend
    bool_grid(ax, mask, y_labels, x_labels, title, numbers=False)
    _axis_names(ax, x_labels, y_labels)
    ax.legend(handles=legend_patches(MASK_COLOURS), loc="upper left", bbox_to_anchor=(1.02, 1.0),
              frameon=False)
    return fig


def plot_bool_masks(masks, titles=None, row_labels=None):
    """2-D boolean masks side by side (rows = queries), 1 (may attend) or 0 in each cell; they
    may differ in shape, e.g. an ``(L, L)`` look-ahead mask next to a ``(1, L)`` padding row."""
    hint = "; pick one sequence and head first, e.g. mask[0, 0]"
    grids = [as_array(m, "each mask", ndim=2, dtype=bool, hint=hint) for m in masks]
    titles = titles or [None] * len(grids)
    widest = max(g.shape[1] for g in grids)
    tallest = max(g.shape[0] for g in grids)
    fig, axes = plt.subplots(1, len(grids), squeeze=False,
                             figsize=(max(3.2 * len(grids), 0.45 * widest * len(grids) + 1.5),
                                      max(2.4, 0.45 * tallest + 1.6)),
                             gridspec_kw={"width_ratios": [g.shape[1] for g in grids]})
    for ax, grid, title in zip(axes[0], grids, titles, strict=True):
        rows = row_labels if row_labels is not None and len(row_labels) == grid.shape[0] else None
        bool_grid(ax, grid, rows, None, title)
        ax.set_xlabel("key (column)")
    axes[0][0].set_ylabel("query (row)")
    fig.tight_layout()
    return fig
