"""The decoder: what one target position may see and where it looks (notebook 07)."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Rectangle

from .style import (
    BLOCKED,
    HIGHLIGHT,
    MAY_ATTEND,
    MAY_ATTEND_LIGHT,
    WEIGHTS_CMAP,
    as_array,
    cell_lines,
    legend_patches,
    loss_curves_figure,
)

STEP_COLOURS = (BLOCKED, MAY_ATTEND_LIGHT, MAY_ATTEND)  # blocked, may attend (other rows), row t


def decoder_step_figure(t, self_mask, cross_weights, tgt_labels, src_labels):
    """What decoder position ``t`` works with. Left: the self-attention mask ``(T, T)`` (True =
    may attend), row ``t`` dark blue. Right: the cross-attention weights ``(T, S)``, row ``t``
    framed and written out, the other rows faded."""
    mask = as_array(self_mask, "self_mask", ndim=2, dtype=bool)
    weights = as_array(cross_weights, "cross_weights", ndim=2)
    T, S = weights.shape
    if mask.shape != (T, T):
        raise ValueError(f"self_mask must be (T, T) = ({T}, {T}), got {mask.shape}")
    if len(tgt_labels) != T or len(src_labels) != S:
        raise ValueError(f"need {T} target and {S} source labels, got {len(tgt_labels)} "
                         f"and {len(src_labels)}")
    if not 0 <= t < T:
        raise ValueError(f"t must be in 0..{T - 1}, got {t}")
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(0.6 * (T + S) + 4.6, 0.55 * T + 2.9), layout="constrained",
        gridspec_kw={"width_ratios": [T, S]})  # equal cells in both panels
    grid = mask.astype(int)  # 0 blocked, 1 allowed in another row, 2 allowed in row t
    grid[t][mask[t]] = 2
    left.imshow(grid, cmap=ListedColormap(STEP_COLOURS), vmin=0, vmax=2, interpolation="nearest")
    seen = np.flatnonzero(mask[t])
    visible = "nothing" if seen.size == 0 else ", ".join(str(s) for s in seen)
    left.set_title(f"self-attention mask: position {t} may see {visible}", fontsize=10)
    right.imshow(weights, cmap=WEIGHTS_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest")
    for i in range(T):
        if i != t:  # fade the other rows
            right.add_patch(Rectangle((-0.5, i - 0.5), S, 1, facecolor="white", alpha=0.7,
                                      edgecolor="none"))
    for j, w in enumerate(weights[t]):
        right.text(j, t, f"{w:.2f}", ha="center", va="center", fontsize=9,
                   color="white" if w > 0.6 else "black")
    right.set_title(f"cross-attention: where position {t} looks in the source", fontsize=10)
    fig.colorbar(right.images[0], ax=[left, right], label="cross-attention weight", shrink=0.8)
    for ax, columns, xlabel in ((left, tgt_labels, "target position (key)"),
                                (right, src_labels, "source token (key, from the memory)")):
        n = len(columns)
        ax.set_xticks(range(n), columns, rotation=90 if max(map(len, columns)) > 5 else 0)
        ax.set_yticks(range(T), [f"{i}: {label}" for i, label in enumerate(tgt_labels)])
        cell_lines(ax, T, n)
        ax.add_patch(Rectangle((-0.5, t - 0.5), n, 1, fill=False, edgecolor=HIGHLIGHT, lw=3,
                               zorder=3, clip_on=False))
        ax.set_xlabel(xlabel)
    left.set_ylabel("decoder position (query)")  # the same rows on the right
    labels = ("blocked", "may attend (other rows)", f"position {t} may see")
    handles = legend_patches(dict(zip(labels, STEP_COLOURS, strict=True)))
    left.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncols=3,
                fontsize=9, frameon=False, handlelength=1.2, columnspacing=1.0)
    fig.suptitle(f"decoder step t = {t}: the input token at position {t} is "
                 f"'{tgt_labels[t]}'", fontsize=11)
    return fig


def decoder_loss_curves_figure(curves, title=None):
    """Training loss per step on a log scale, one line per entry of ``curves`` (label -> losses)."""
    return loss_curves_figure(curves, "cross-entropy loss (log scale)", (7, 3.6), title, 11)
