"""Scaling up (notebook 13): which rank trains on which pairs, the loss of W processes, a step of
data parallelism with its all-reduce, and FSDP's all-gather and reduce-scatter."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Rectangle

from .style import (
    BLOCKED,
    COLLECTIVE,
    EDGE,
    FAINT,
    INK,
    MUTED,
    RANK_COLOURS,
    as_array,
    box,
    cell_lines,
    legend_patches,
    loss_curves_figure,
)


def sharding_figure(shares):
    """Which dataset item each rank trains on: ``shares`` ``(W, steps, b)`` holds rank r's indices
    at each step. Row s is step s's global batch in the order of the shared permutation, which
    ``DistributedSampler`` deals out: item j to rank ``j mod W``, in rank r's colour."""
    shares = as_array(shares, "shares", ndim=3, dtype=int,
                      hint=" (ranks, steps, items per rank)")
    W, steps, b = shares.shape
    if W > len(RANK_COLOURS):
        raise ValueError(f"sharding_figure draws at most {len(RANK_COLOURS)} ranks, got {W}")
    index = np.zeros((steps, W * b), dtype=int)  # the dataset index in each cell
    rank = np.zeros((steps, W * b), dtype=int)  # the rank that trains on it
    for r in range(W):
        index[:, r::W], rank[:, r::W] = shares[r], r
    fig, ax = plt.subplots(figsize=(min(0.55 * W * b + 2.6, 9.0), 0.55 * steps + 1.5),
                           layout="constrained")
    ax.imshow(rank, cmap=ListedColormap(RANK_COLOURS[:W]), vmin=-0.5, vmax=W - 0.5,
              aspect="equal", interpolation="nearest")
    for (i, j), value in np.ndenumerate(index):
        ax.text(j, i, str(value), ha="center", va="center", fontsize=9)
    cell_lines(ax, steps, W * b)
    ax.set_xticks(range(W * b))
    ax.set_yticks(range(steps), [f"step {s}" for s in range(steps)])
    ax.set_xlabel("position in the global batch (the shared permutation)")
    legend = {f"rank {r}": RANK_COLOURS[r] for r in range(W)}
    ax.legend(handles=legend_patches(legend)[::-1], loc="upper left", bbox_to_anchor=(1.01, 1),
              fontsize=9, frameon=False)
    ax.set_title(f"{W} ranks, global batch B = {W * b}: the numbers are dataset indices",
                 fontsize=10)
    return fig


def distributed_loss_figure(curves, title=None):
    """Training loss per step, one line per run (label -> losses): solid, dashed, dotted, so
    runs that coincide stay visible."""
    return loss_curves_figure(curves, "training loss", (7, 3.4), title, 11,
                              styles=("-", "--", ":"), log=False)


def data_parallel_figure():
    """One step of data parallelism with two ranks: each holds the whole model and runs half of
    the batch; the all-reduce gives both the average gradient, so both take the same step."""
    fig, ax = plt.subplots(figsize=(9, 5.2), layout="constrained")
    rows = [(4.6, "pairs 0, 2, 4, ... of the batch", "pairs 1, 3, 5, ... of the batch"),
            (3.6, "the whole model (weights θ)", "the whole model (the same θ)"),
            (2.6, "forward + backward: gradient g₀", "forward + backward: gradient g₁"),
            (0.6, "clip, Adam: θ ← the same update", "clip, Adam: θ ← the same update")]
    style = "round,pad=0.03,rounding_size=0.1"
    for r, x in enumerate((2.0, 6.0)):
        ax.text(x, 5.35, f"rank {r} (process {r})", ha="center", fontsize=11, color=INK)
        for y, *texts in rows:
            box(ax, x, y, 3.3, 0.55, texts[r], RANK_COLOURS[r], style)
        for top, bottom in ((4.3, 3.9), (3.3, 2.9), (2.3, 1.9), (1.3, 0.9)):  # between the boxes
            ax.annotate("", (x, bottom), (x, top), arrowprops={"arrowstyle": "->", "color": INK})
    box(ax, 4.0, 1.6, 7.3, 0.6, "all-reduce during backward: every rank gets (g₀ + g₁) / 2",
        COLLECTIVE, style, fontsize=10)
    ax.set(xlim=(0, 8), ylim=(0.1, 5.7))
    ax.axis("off")
    return fig


def fsdp_figure():
    """One layer under FSDP with two ranks, each keeping half of the weights: an all-gather
    gives both the whole layer for forward and backward, then a reduce-scatter leaves each rank
    the average gradient of its own half, which it alone updates."""
    stages = [("held: each rank its half", ("W₀", None), (None, "W₁")),
              ("all-gather: the whole layer", ("W₀", "W₁"), ("W₀", "W₁")),
              ("backward: gradients of it all", ("g₀⁰", "g₁⁰"), ("g₀¹", "g₁¹")),
              ("reduce-scatter: the mean\nof its own half", ("(g₀⁰+g₀¹)/2", None),
               (None, "(g₁⁰+g₁¹)/2"))]
    fig, ax = plt.subplots(figsize=(10, 3.4), layout="constrained")
    width, gap = 2.0, 0.6
    for s, (title, *ranks) in enumerate(stages):
        x0 = s * (width + gap)
        ax.text(x0 + width / 2, 2.55, title, ha="center", va="bottom", fontsize=9.5, color=INK)
        for r, halves in enumerate(ranks):
            y = 1.6 - 1.1 * r
            for h, text in enumerate(halves):
                colour = RANK_COLOURS[h] if text else BLOCKED
                ax.add_patch(Rectangle((x0 + h * width / 2, y), width / 2, 0.7,
                                       facecolor=colour, edgecolor=EDGE))
                ax.text(x0 + (h + 0.5) * width / 2, y + 0.35, text or "–", ha="center",
                        va="center", fontsize=9, color=INK if text else FAINT)
        if s:
            for r in range(2):
                y = 1.95 - 1.1 * r
                ax.annotate("", (x0 - 0.05, y), (x0 - gap + 0.05, y),
                            arrowprops={"arrowstyle": "->", "color": INK})
    for r in range(2):
        ax.text(-0.15, 1.95 - 1.1 * r, f"rank {r}", ha="right", va="center", fontsize=10)
    ax.text(0, -0.2, "W₀, W₁: the two halves of the layer's weights; gᵢʳ: rank r's gradient of "
            "half i (from its own pairs). Rank 0's half is blue, rank 1's orange; grey: not held.",
            fontsize=8.5, color=MUTED, va="top")
    ax.set(xlim=(-1.0, 4 * width + 3 * gap + 0.2), ylim=(-0.6, 3.1))
    ax.axis("off")
    return fig
