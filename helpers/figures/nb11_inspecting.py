"""Inspecting a trained model's attention: one map to explore, alignment accuracy (notebook 11;
every layer and head at once is ``maps.attention_grid_figure``)."""

import matplotlib.pyplot as plt
import numpy as np

from .style import SCORE_CMAP, as_array, heatmap

ATTENTION_KINDS = {"encoder": "encoder self-attention", "decoder": "decoder self-attention",
                   "cross": "cross-attention"}


def attention_explorer_figure(maps, kind="cross", layer=0, head=0):
    """One map of one sentence of notebook 11's ``maps`` (``src_tokens``, ``tgt_in``,
    ``tgt_out``, ``french`` and a ``(num_layers, num_heads, Lq, Lk)`` array per ``kind``) at
    ``layer`` and ``head`` (or "mean" of the heads); the decoder's masked future is grey."""
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"kind must be one of {list(ATTENTION_KINDS)}, got {kind!r}")
    x_labels = list(maps["tgt_in"] if kind == "decoder" else maps["src_tokens"])
    y_labels = list(maps["src_tokens"])
    if kind != "encoder":  # "input -> predicted word": the row fed "voiture" predicts "rouge"
        y_labels = [f"{a} → {b}" for a, b in zip(maps["tgt_in"], maps["tgt_out"], strict=True)]
    w = as_array(maps[kind], f"maps[{kind!r}]", ndim=4)
    num_layers, num_heads = w.shape[:2]
    if not 0 <= layer < num_layers:
        raise ValueError(f"layer must be in 0..{num_layers - 1}, got {layer}")
    if head != "mean" and not (isinstance(head, int) and 0 <= head < num_heads):
        raise ValueError(f"head must be in 0..{num_heads - 1} or 'mean', got {head!r}")
    weights = w[layer].mean(axis=0) if head == "mean" else w[layer, head]
    Lq, Lk = weights.shape
    fig, ax = plt.subplots(figsize=(0.55 * Lk + 3.6, 0.45 * Lq + 1.8), layout="constrained")
    future = np.triu(np.ones((Lq, Lk), bool), k=1) if kind == "decoder" else None
    image = heatmap(ax, weights, x_labels, y_labels, blocked=future, annotate=True,
                    hide_below=0.005, fontsize=7)
    ax.set(xlabel="key (English)" if kind != "decoder" else "key (French, shifted right)",
           ylabel="query" if kind == "encoder" else "query: input → predicted")
    which = "mean of the heads" if head == "mean" else f"head {head}"
    ax.set_title(f"{ATTENTION_KINDS[kind]}, layer {layer}, {which}\n"
                 f"{' '.join(maps['src_tokens'])}\n→ {maps['french']}", fontsize=10)
    fig.colorbar(image, ax=ax, label="attention weight", shrink=0.9)
    return fig


def alignment_accuracy_figure(accuracy, titles, chance=None):
    """Accuracies in [0, 1] per layer (rows) and head (columns), one panel per entry of
    ``accuracy`` ``(panels, num_layers, num_heads)``; ``chance`` is quoted in the title."""
    acc = as_array(accuracy, "accuracy", ndim=3)
    panels, num_layers, num_heads = acc.shape
    if len(titles) != panels:
        raise ValueError(f"{len(titles)} titles given for {panels} panels")
    fig, axes = plt.subplots(1, panels, squeeze=False, layout="constrained",
                             figsize=(2.9 * panels + 1.3, 0.75 * num_layers + 1.6))
    for p, ax in enumerate(axes[0]):
        image = ax.imshow(acc[p], cmap=SCORE_CMAP, vmin=0.0, vmax=1.0, aspect="equal")
        for (i, j), a in np.ndenumerate(acc[p]):
            ax.text(j, i, f"{100 * a:.0f}%", ha="center", va="center", fontsize=9,
                    color="white" if a > 0.6 else "black")
        ax.set_xticks(range(num_heads), [f"head {h}" for h in range(num_heads)], fontsize=8)
        ax.set_yticks(range(num_layers), [f"layer {i}" for i in range(num_layers)], fontsize=8)
        ax.set_title(titles[p], fontsize=10)
    fig.colorbar(image, ax=axes, label="fraction of noun-adjective pairs", shrink=0.9)
    if chance is not None:
        fig.suptitle(f"argmax of cross-attention on the right English word "
                     f"(chance about {100 * chance:.0f}%)", fontsize=10)
    return fig
