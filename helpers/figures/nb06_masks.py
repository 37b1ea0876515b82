"""The mask explorer of notebook 06, drawing the numbers of ``helpers.masks.mask_explorer_data``."""

import matplotlib.pyplot as plt

from ..masks import mask_explorer_data
from .style import bool_grid, heatmap


def mask_explorer_figure(seq_len=6, pad_len=2, causal=True, seed=0):
    """The combined mask of one padded sequence (left) and the attention weights it allows
    (right), blocked cells grey in both; a row with no allowed key is all zeros, never NaN."""
    data = mask_explorer_data(seq_len, pad_len, causal, seed=seed)
    mask, weights, labels = data["mask"], data["weights"], data["labels"]
    padding = f"padding = {data['pad_len']}"
    if data["clamped"]:
        padding += f" (asked {pad_len}, clamped to L)"
    side = min(0.42 * seq_len + 2.2, 6.5)
    fig, (left, right) = plt.subplots(1, 2, figsize=(2 * side + 1.6, side + 0.4),
                                      layout="constrained")
    bool_grid(left, mask, labels, labels,
              f"mask: L = {seq_len}, {padding}, causal {'on' if causal else 'off'}")
    image = heatmap(right, weights, labels, labels, blocked=~mask, annotate=seq_len <= 10,
                    fontsize=9 if seq_len <= 7 else 7)
    if not mask.any():
        right.text((seq_len - 1) / 2, (seq_len - 1) / 2,
                   "every key is padding:\nall weights are 0 (not NaN)", ha="center",
                   va="center", fontsize=10, color="dimgrey")
    right.set_title(f"attention weights (random q, k, seed {seed})", fontsize=10)
    fig.colorbar(image, ax=right, label="weight (grey: blocked, exactly 0)", shrink=0.8)
    for ax in (left, right):
        ax.set(xlabel="key (attended to)", ylabel="query (attending)")
    return fig
