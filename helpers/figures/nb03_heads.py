"""Splitting into heads and merging them back, drawn as coloured column blocks (notebook 03)."""

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.colors import ListedColormap


def head_split_figure(d_model=24, num_heads=4, seq_len=5):
    """The ``(L, d_model)`` projection, the ``(h, L, d_k)`` stack after ``split_heads`` (one
    block per head, ticks naming the original columns) and the ``(L, d_model)`` matrix after
    ``merge_heads``; every column is coloured by its head ``c // d_k``."""
    if num_heads < 1 or d_model % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
    d_k = d_model // num_heads
    before = np.tile(np.arange(d_model) // d_k, (seq_len, 1)).astype(float)
    stacked = np.full((seq_len, num_heads * (d_k + 1) - 1), np.nan)  # an empty column between
    block_starts = [head * (d_k + 1) for head in range(num_heads)]
    for head, start in enumerate(block_starts):
        stacked[:, start:start + d_k] = head
    cmap = ListedColormap(sns.color_palette("husl", num_heads))
    cmap.set_bad("white")
    widths = [d_model, stacked.shape[1], d_model]
    fig, axes = plt.subplots(1, 3, figsize=(15, 1.9 + 0.32 * seq_len),
                             gridspec_kw={"width_ratios": widths, "wspace": 0.12})
    tick_size = 7 if max(widths) <= 32 else 5
    titles = [f"projected X: (L, d_model) = ({seq_len}, {d_model})",
              f"split_heads: (h, L, d_k) = ({num_heads}, {seq_len}, {d_k})",
              f"merge_heads: (L, d_model) = ({seq_len}, {d_model})"]
    for ax, data, title in zip(axes, (before, stacked, before), titles, strict=True):
        ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=-0.5, vmax=num_heads - 0.5,
                  aspect="auto", interpolation="nearest")
        ax.set_title(title, fontsize=10, pad=16)
        ax.set_yticks(range(seq_len), [])
        ax.set_xlabel("column (feature) of d_model", fontsize=8)
        ax.tick_params(length=0)
        for x in np.arange(data.shape[1] + 1) - 0.5:  # thin white lines between cells
            ax.axvline(x, color="white", linewidth=0.6)
        for y in np.arange(seq_len + 1) - 0.5:
            ax.axhline(y, color="white", linewidth=0.6)
        ax.spines[:].set_visible(False)
    axes[0].set_yticklabels([f"token {i}" for i in range(seq_len)], fontsize=8)
    for ax in (axes[0], axes[2]):
        ax.set_xticks(range(d_model), range(d_model), fontsize=tick_size)
        for b in range(1, num_heads):  # head boundaries
            ax.axvline(b * d_k - 0.5, color="black", linewidth=1.5)
    axes[1].set_xticks([s + j for s in block_starts for j in range(d_k)],
                       [head * d_k + j for head in range(num_heads) for j in range(d_k)],
                       fontsize=tick_size)
    if num_heads <= 12:
        for head, start in enumerate(block_starts):
            axes[1].text(start + (d_k - 1) / 2, 1.01, f"head {head}" if num_heads <= 6 else head,
                         transform=axes[1].get_xaxis_transform(), ha="center", va="bottom",
                         fontsize=8)
    for left, right in ((axes[0], axes[1]), (axes[1], axes[2])):
        x0, x1 = left.get_position().x1, right.get_position().x0
        y = left.get_position().y0 + left.get_position().height / 2
        fig.text((x0 + x1) / 2, y, "\u2192", ha="center", va="center", fontsize=16)
    return fig
