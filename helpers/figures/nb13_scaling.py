"""Scaling up: which rank trains on which pairs, and the loss of W processes (notebook 13)."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap

from .style import RANK_COLOURS, as_array, cell_lines, legend_patches, loss_curves


def sharding_figure(shares, title=None):
    """Which item of the dataset each rank trains on, step by step.

    ``shares`` ``(W, steps, b)``: rank r's dataset indices at each step (``b = B / W``). Row s of
    the grid is step s's global batch of ``B = W b`` items, in the order of the shared
    permutation; ``DistributedSampler`` deals item j of the block to rank ``j mod W``, so
    rank r's k-th item is drawn in column ``r + W k``, in rank r's colour, with its index.
    """
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
    ax.set_title(title or f"{W} ranks, global batch B = {W * b}: the numbers are dataset indices",
                 fontsize=10)
    return fig


def distributed_loss_figure(curves, title=None):
    """Training loss per step, one line per run: ``curves`` label -> losses. The first run is
    drawn solid, the others dashed and dotted, so runs that coincide stay visible."""
    fig, ax = plt.subplots(figsize=(7, 3.4), layout="constrained")
    loss_curves(ax, curves, "training loss", styles=("-", "--", ":"), log=False)
    if title:
        ax.set_title(title, fontsize=11)
    return fig
