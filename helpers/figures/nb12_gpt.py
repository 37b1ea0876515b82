"""Decoder-only (notebook 12): the two architectures, the training curves, the GPT's attention
while it translates, the sampling filters, rotary positions and the modern block's ablation."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyBboxPatch, Rectangle

from .maps import attention_heatmap
from .style import (
    BLOCK_COLOURS,
    BLOCKED,
    FAINT,
    FRAME,
    HIGHLIGHT,
    INK,
    MAY_ATTEND,
    MUTED,
    as_array,
    box,
    log_loss_axis,
)


def _stack(ax, x, y0, boxes, repeat, label, side=-1):
    """``boxes`` (text, kind) from bottom to top, the ones named in ``repeat`` framed with "N ×"
    on the left (``side=-1``) or the right (``side=1``); returns their centres."""
    ys = [y0 + 0.8 * i for i in range(len(boxes))]
    inside = [y for (text, _), y in zip(boxes, ys, strict=True) if text in repeat]
    if inside:
        ax.add_patch(FancyBboxPatch((x - 1.55, min(inside) - 0.45), 3.1,
                                    max(inside) - min(inside) + 0.9, facecolor=FRAME,
                                    edgecolor=FAINT, boxstyle="round,pad=0.02,rounding_size=0.15"))
        ax.text(x + side * 1.65, (min(inside) + max(inside)) / 2, "N ×", va="center",
                ha="right" if side < 0 else "left", fontsize=9, color=MUTED)
    for (text, kind), y in zip(boxes, ys, strict=True):
        box(ax, x, y, 2.6, 0.55, text, BLOCK_COLOURS[kind], "round,pad=0.04,rounding_size=0.12")
    for a, b in zip(ys, ys[1:], strict=False):
        ax.annotate("", (x, b - 0.3), (x, a + 0.3), arrowprops={"arrowstyle": "->", "color": INK})
    ax.text(x, y0 - 0.65, label, ha="center", va="top", fontsize=9, color=INK)
    return ys


def decoder_only_figure():
    """The encoder-decoder of notebooks 05-08 (left) and the decoder-only model of notebook 12
    (right): the same blocks without the encoder and without cross-attention."""
    fig, ax = plt.subplots(figsize=(10, 4.6), layout="constrained")
    encoder = [("embedding + positions", "embedding"), ("self-attention", "attention"),
               ("feed-forward", "feed-forward")]
    decoder = [("embedding + positions", "embedding"), ("masked self-attention", "attention"),
               ("cross-attention", "attention"), ("feed-forward", "feed-forward"),
               ("linear + softmax", "output layer")]
    enc_y = _stack(ax, 1.6, 0.6, encoder, {"self-attention", "feed-forward"}, "English")
    dec_y = _stack(ax, 5.6, 0.6, decoder, {"masked self-attention", "cross-attention",
                                          "feed-forward"}, "<bos> + French so far", side=1)
    ax.annotate("", (5.6 - 1.3, dec_y[2]), (1.6 + 1.3, enc_y[-1]),
                arrowprops={"arrowstyle": "->", "color": MAY_ATTEND, "lw": 1.5,
                            "connectionstyle": "arc3,rad=-0.2"})
    ax.text(3.6, enc_y[-1] + 0.62, "memory", ha="center", fontsize=8, color=MAY_ATTEND)
    gpt = [("embedding (+ positions)", "embedding"), ("masked self-attention", "attention"),
           ("feed-forward", "feed-forward"), ("linear + softmax", "output layer")]
    _stack(ax, 9.8, 0.6, gpt, {"masked self-attention", "feed-forward"},
           "<bos> English <sep> French so far")
    ax.text(3.6, 4.55, "encoder-decoder (notebooks 05-08)", ha="center", fontsize=11, color=INK)
    ax.text(9.8, 4.55, "decoder-only, a GPT (this notebook)", ha="center", fontsize=11, color=INK)
    ax.axvline(7.75, color=BLOCKED, lw=1)
    ax.set(xlim=(-0.3, 11.6), ylim=(-0.5, 4.8))
    ax.axis("off")
    return fig


def next_token_figure(probs, kept, labels, title=None, top=12, samples=()):
    """The ``top`` most likely next tokens: ``probs`` ``(V,)`` before the filters (grey), ``kept``
    ``(V,)`` after them (blue, sampled from); below, the texts of ``samples``."""
    probs, kept = as_array(probs, "probs", ndim=1), as_array(kept, "kept", ndim=1)
    order = np.argsort(-probs, kind="stable")[:top]  # the model's most likely tokens
    fig = plt.figure(figsize=(8, 3.2 + 0.25 * len(samples)), layout="constrained")
    ax, text = fig.subplots(2, 1, height_ratios=[3.2, 0.01 + 0.25 * len(samples)])
    x = np.arange(len(order))
    ax.bar(x - 0.2, probs[order], 0.4, color=BLOCKED, edgecolor=FAINT, label="model")
    ax.bar(x + 0.2, kept[order], 0.4, color=MAY_ATTEND, label="after the filters (sampled from)")
    ax.set_xticks(x, [labels[i] for i in order], rotation=35, ha="right", fontsize=9)
    ax.set(ylabel="probability", ylim=(0, 1.02))
    ax.legend(fontsize=9, loc="upper right")
    ax.set_title(title, fontsize=10)
    text.axis("off")
    for i, sample in enumerate(samples):
        text.text(0.0, 1 - (i + 0.5) / len(samples), f"sample {i + 1}: {sample}", fontsize=9,
                  va="center", color=INK, transform=text.transAxes)
    return fig


def ablation_figure(rows, title=None):
    """One row per variant: the exact match (dots: seeds, bar: mean) and the final training loss
    (dots: seeds, tick: mean); ``rows`` are dicts of variant, seed, exact_match and final_loss."""
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.45 * len(variants) + 1.4), sharey=True,
                             layout="constrained")
    for ax, key, label in [(axes[0], "exact_match", "exact match on the test split (%)"),
                           (axes[1], "final_loss", "training loss, last 20 steps")]:
        for i, name in enumerate(variants):
            values = [r[key] for r in rows if r["variant"] == name]
            if key == "exact_match":  # a bar from 0 to the mean
                ax.barh(i, np.mean(values), color=BLOCK_COLOURS["feed-forward"], edgecolor=FAINT)
            else:  # losses differ by little: the mean as a tick on an axis that fits them
                ax.plot([np.mean(values)], [i], "|", color=MAY_ATTEND, ms=18, mew=2.5)
            ax.plot(values, [i] * len(values), "o", color=INK, ms=4)
        ax.set_xlabel(label)
        ax.grid(True, axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(variants)), variants, fontsize=9)
    axes[0].invert_yaxis()
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def gpt_training_figure(curves, window=20, title=None):
    """Training losses per step (label -> losses), each as its moving average over ``window``
    steps, log scale."""
    fig, ax = plt.subplots(figsize=(7.5, 3.4), layout="constrained")
    first_length = len(next(iter(curves.values())))
    for (label, losses), style in zip(curves.items(), ("-", "--", ":"), strict=False):
        losses = as_array(losses, label, ndim=1)
        w = max(1, min(window, losses.size))
        values = np.convolve(losses, np.ones(w) / w, "valid")
        first = first_length - len(values) + 1  # the window's last step
        ax.plot(np.arange(first, first + len(values)), values, style, lw=1.8,
                label=f"{label} (mean of {w} steps)")
    log_loss_axis(ax, (1, 1.25, 1.5, 2, 3, 4, 6, 8), title)
    return fig


def _arrow(ax, angle, colour, label=None, length=1.0, style="-"):
    x, y = length * np.cos(angle), length * np.sin(angle)
    ax.annotate("", (x, y), (0, 0), arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 1.8,
                                                "linestyle": style, "shrinkA": 0, "shrinkB": 0})
    if label:  # beside the tip, turned a little counter-clockwise off the arrow
        ax.text(1.17 * length * np.cos(angle + 0.13), 1.17 * length * np.sin(angle + 0.13), label,
                ha="center", va="center", fontsize=9, color=colour)


def _arc(ax, start, stop, radius, colour, label):
    angles = np.linspace(start, stop, 40)
    ax.plot(radius * np.cos(angles), radius * np.sin(angles), color=colour, lw=1.4)
    middle = (start + stop) / 2
    ax.text((radius + 0.2) * np.cos(middle), (radius + 0.2) * np.sin(middle), label, fontsize=9,
            ha="center", va="center", color=colour)


def rope_figure(theta=0.35, positions=6, pairs=((2, 0), (8, 6)), q_angle=0.3, k_angle=-0.5):
    """Rotary positions in the plane of one pair of features. Left: one vector at positions 0 ...
    ``positions - 1``, turned by ``p * theta``. Right: a query at p and a key at r for each (p, r)
    of ``pairs`` (one offset): the same angle between them, so the same dot product."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 5.0), layout="constrained")
    left, right = axes
    colours = plt.get_cmap("viridis")(np.linspace(0.05, 0.85, positions))
    for p in range(positions):
        _arrow(left, q_angle + p * theta, colours[p], f"p = {p}")
    _arc(left, q_angle, q_angle + theta, 0.35, INK, "θ")
    left.set_title(f"one pair of features at positions 0-{positions - 1}:\nturned by p·θ "
                   f"(θ = {theta} rad here)", fontsize=10)
    for (p, r), colour in zip(pairs, (MAY_ATTEND, HIGHLIGHT), strict=False):
        q, k = q_angle + p * theta, k_angle + r * theta
        _arrow(right, q, colour, f"query, p = {p}")
        _arrow(right, k, colour, f"key, r = {r}", style="--")
        _arc(right, k, q, 0.45 if colour == MAY_ATTEND else 0.7, colour, f"{q - k:.2f} rad")
    offset = pairs[0][0] - pairs[0][1]
    right.set_title(f"query and key {offset} positions apart, twice:\nthe same angle between "
                    "them, so the same score", fontsize=10)
    left.set(xlim=(-1.45, 1.45), ylim=(-0.4, 1.45), aspect="equal")
    right.set(xlim=(-1.45, 1.45), ylim=(-1.0, 1.45), aspect="equal")
    for ax in axes:
        ax.axhline(0, color=FAINT, lw=0.6)
        ax.axvline(0, color=FAINT, lw=0.6)
        ax.set(xticks=[], yticks=[], xlabel="feature 2i", ylabel="feature 2i + 1")
    return fig


def gpt_attention_figure(weights, tokens, sep, title=None):
    """One GPT attention map ``(L, L)`` over ``tokens`` (``<bos> English <sep> French``), the
    causal future grey. The rows from ``sep`` (the position of ``<sep>``) on predict the French
    (read ``input → predicted``); their English columns, framed in orange, do cross-attention."""
    weights = as_array(weights, "weights", ndim=2)
    L = weights.shape[0]
    if weights.shape != (L, L) or len(tokens) != L:
        raise ValueError(f"expected weights (L, L) and L tokens, got {weights.shape} and "
                         f"{len(tokens)} tokens")
    predicted = [*tokens[sep + 1:], "<eos>"]  # row t predicts token t + 1
    rows = [*tokens[:sep], *(f"{a} → {b}" for a, b in zip(tokens[sep:], predicted, strict=True))]
    blocked = np.triu(np.ones((L, L), dtype=bool), 1)  # the future: masked
    fig, ax = plt.subplots(figsize=(7.2, 6.2), layout="constrained")
    attention_heatmap(weights, tokens, rows, title=title, ax=ax, vmax=None, blocked=blocked)
    ax.add_patch(Rectangle((0.5, sep - 0.5), sep - 1, L - sep, fill=False, edgecolor=HIGHLIGHT,
                           lw=2))  # French (and <sep>) queries x English keys
    ax.axhline(sep - 0.5, color=INK, lw=0.8)  # below: the rows that predict the French
    ax.axvline(sep + 0.5, color=INK, lw=0.8)  # right: the French words as keys
    ax.tick_params(axis="x", rotation=60)
    return fig
