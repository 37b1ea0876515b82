"""The whole model: next-token probabilities and where the parameters live (notebook 08)."""

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.patches import Rectangle

from .style import CONTRAST, INK, WEIGHTS_CMAP, as_array


def next_token_probabilities_figure(probs, row_labels, vocab_labels, targets=None, title=None):
    """Next-token probabilities ``(T, V)``, row t the distribution after position t, coloured
    from 0 to the largest (a red line on the colour bar marks 1/V); ``targets`` (a vocabulary
    index per row) frames the true next tokens."""
    p = as_array(probs, "probs")
    if p.ndim != 2 or p.shape != (len(row_labels), len(vocab_labels)):
        raise ValueError(f"probs must have shape (len(row_labels), len(vocab_labels)) = "
                         f"({len(row_labels)}, {len(vocab_labels)}), got {p.shape}")
    T, V = p.shape
    fig, ax = plt.subplots(figsize=(0.62 * V + 3.2, 0.55 * T + 1.9), layout="constrained")
    image = ax.imshow(p, cmap=WEIGHTS_CMAP, vmin=0.0, vmax=float(p.max()), aspect="auto")
    for (i, j), value in np.ndenumerate(p):
        ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8,
                color="white" if value > 0.6 * p.max() else "black")
    ax.set_xticks(range(V), vocab_labels, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(T), row_labels)
    ax.set(xlabel="next token (vocabulary)", ylabel="decoder position: input token")
    for row, column in enumerate([] if targets is None else targets):
        ax.add_patch(Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="black",
                               lw=2.5))
    bar = fig.colorbar(image, ax=ax, label="probability (red line: 1/V)", shrink=0.9)
    bar.ax.axhline(1.0 / V, color=CONTRAST[0], lw=2.5)
    ax.set_title(title, fontsize=11)
    return fig


def parameter_breakdown_figure(breakdowns, reference=None, reference_label=None):
    """One stacked bar per model (label -> ``{component: count}``), in millions, each component
    in one colour and each total at the end; ``reference`` (a count) adds a dashed line."""
    components = list(dict.fromkeys(c for parts in breakdowns.values() for c in parts))
    colours = dict(zip(components, sns.color_palette("Set2", len(components)), strict=True))
    labels = list(breakdowns)
    top = max(sum(parts.values()) for parts in breakdowns.values()) / 1e6
    fig, ax = plt.subplots(figsize=(10, 0.9 * len(labels) + 2.2), layout="constrained")
    seen = set()
    for row, label in enumerate(labels):
        left = 0.0
        for component, count in breakdowns[label].items():
            ax.barh(row, count / 1e6, left=left, color=colours[component], edgecolor="white",
                    label=None if component in seen else component)
            if count / 1e6 > 0.06 * top:  # the segment's size, where it fits
                ax.text(left + count / 2e6, row, f"{count / 1e6:.1f}", ha="center", va="center",
                        fontsize=9)
            seen.add(component)
            left += count / 1e6
        ax.text(left + 0.01 * top, row, f"{left:.1f}M", va="center", fontsize=10, zorder=5,
                bbox=dict(facecolor="white", edgecolor="none", pad=1.5))
    if reference is not None:
        ax.axvline(reference / 1e6, color=INK, ls="--", lw=1.5,
                   label=reference_label or f"reference: {reference / 1e6:.0f}M")
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()  # the first model on top
    ax.set(xlim=(0, top * 1.12), xlabel="parameters (millions)")
    ax.grid(axis="x", alpha=0.3)
    fig.legend(loc="outside lower center", ncol=3, frameon=False, fontsize=9)
    return fig
