"""The architecture at a glance and recurrence vs attention (notebook 00; the architecture is
also ``assets/architecture.png``, redrawn by ``python -m tests.tools --write-assets``)."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Patch

from .style import BADGE, BLOCK_COLOURS, EDGE, FAINT, FRAME, HIGHLIGHT, INK, MUTED, box

_ARROW = dict(arrowstyle="-|>", mutation_scale=12, color=INK, lw=1.2, shrinkA=0, shrinkB=0)


def _arrow(ax, start, end, **style):
    ax.add_patch(FancyArrowPatch(start, end, **{**_ARROW, **style}))


def _tag(ax, x, y, text):
    """A dark badge with the number of the notebook that teaches a block."""
    ax.text(x, y, text, ha="center", va="center", fontsize=9, color="white", fontweight="bold",
            zorder=4, bbox=dict(boxstyle="round,pad=0.25", facecolor=BADGE, edgecolor="none"))


def _block(ax, x, y, w, h, text, kind, tag, tag_x):
    """A block coloured by its kind, with the tag of its notebook beside it."""
    box(ax, x, y, w, h, text, BLOCK_COLOURS[kind], "round,pad=0,rounding_size=0.12",
        fontsize=10.5, text_colour="black", zorder=2, lw=1.2)
    _tag(ax, tag_x, y, tag)


def _column(ax, x, blocks, side, start_y):
    """One stack, bottom to top: ``blocks`` of (centre y, height, text, kind, tag, inputs), where
    ``inputs`` is "qkv" (self-attention: the line forks into Q, K, V), "q" (cross-attention) or
    None; the line enters the first block from ``start_y``. A residual path leaves the line below
    every sub-layer, runs on ``side`` (-1 left, +1 right, tags opposite) into the "add & norm"."""
    w = 3.0
    for i, (y, h, text, kind, tag, inputs) in enumerate(blocks):
        _block(ax, x, y, w, h, text, kind, tag, x - side * 2.05)
        bottom = y - h / 2
        below = blocks[i - 1][0] + blocks[i - 1][1] / 2 if i else start_y  # top of the one below
        if inputs == "qkv":  # fork into three arrows from a bar under the block
            ax.plot([x, x], [below, bottom - 0.3], color=INK, lw=1.2)
            ax.plot([x - 0.75, x + 0.75], [bottom - 0.3] * 2, color=INK, lw=1.2)
            for dx, letter in [(-0.75, "Q"), (0.0, "K"), (0.75, "V")]:
                _arrow(ax, (x + dx, bottom - 0.3), (x + dx, bottom))
                ax.text(x + dx + 0.07, bottom - 0.14, letter, fontsize=8, va="center")
        else:
            _arrow(ax, (x, below), (x, bottom))
            if inputs == "q":
                ax.text(x + 0.07, bottom - 0.14, "Q", fontsize=8, va="center")
        if kind == "add & norm":  # residual: from below the previous sub-layer into this block
            sub_bottom = blocks[i - 1][0] - blocks[i - 1][1] / 2
            y_fork = sub_bottom - (0.55 if blocks[i - 1][5] else 0.25)
            x_side = x + side * (w / 2 + 0.35)
            ax.plot([x], [y_fork], "o", ms=3.5, color=INK, zorder=3)
            ax.plot([x, x_side, x_side], [y_fork, y_fork, y], color=INK, lw=1.2,
                    solid_capstyle="round")
            _arrow(ax, (x_side, y), (x + side * w / 2, y))


def _embedding(ax, x, side, label):
    """Tokens -> embedding -> + positional encoding, at the bottom of a column."""
    ax.text(x, 0.0, label, ha="center", va="center", fontsize=10.5)
    _arrow(ax, (x, 0.25), (x, 0.75))
    name = "input embedding" if side < 0 else "output embedding"
    _block(ax, x, 1.05, 3.0, 0.6, name, "embedding", "05", x - side * 2.05)
    _arrow(ax, (x, 1.35), (x, 2.05))
    ax.add_patch(Circle((x, 2.3), 0.25, facecolor="white", edgecolor=INK, lw=1.2, zorder=3))
    ax.text(x, 2.3, "+", ha="center", va="center", fontsize=14, zorder=4)
    xc = x + side * 1.45  # the positional encoding: a sine wave in a circle
    ax.add_patch(Circle((xc, 2.3), 0.38, facecolor=BLOCK_COLOURS["positional encoding"],
                        edgecolor=EDGE, lw=1.2, zorder=3))
    t = np.linspace(-0.28, 0.28, 50)
    ax.plot(xc + t, 2.3 + 0.16 * np.sin(t * 2 * np.pi / 0.28), color="darkgreen", lw=1.2, zorder=4)
    _arrow(ax, (x + side * 1.07, 2.3), (x + side * 0.25, 2.3))
    ax.text(xc + side * 0.5, 2.3, "positional\nencoding", ha="right" if side < 0 else "left",
            va="center", fontsize=9.5)
    _tag(ax, xc, 1.72, "02")


def _stack_frame(ax, x, y0, y1, side, name, tag):
    """The grey frame of a layer repeated N times, labelled on the outer side."""
    ax.add_patch(FancyBboxPatch((x - 2.15, y0), 4.3, y1 - y0, zorder=1,
                                boxstyle="round,pad=0,rounding_size=0.25",
                                facecolor=FRAME, edgecolor=FAINT, lw=1.3))
    x_text, middle = x + side * 2.35, (y0 + y1) / 2
    ha = "right" if side < 0 else "left"
    ax.text(x_text, middle + 0.45, "N ×", ha=ha, va="center", fontsize=14, fontweight="bold")
    ax.text(x_text, middle - 0.2, name, ha=ha, va="center", fontsize=10, style="italic",
            color=MUTED)
    _tag(ax, x_text + side * 0.3, middle - 0.85, tag)


def architecture_figure():
    """The encoder-decoder Transformer after Figure 1 of Vaswani et al. (2017): one colour per
    kind of block, residual side branches, each block tagged with the notebook that teaches it."""
    fig, ax = plt.subplots(figsize=(11.0, 11.0))
    ax.set(xlim=(-0.2, 13.2), ylim=(-0.6, 14.4), aspect="equal")
    ax.axis("off")
    xe, xd = 3.4, 9.2  # centres of the encoder and decoder columns
    _stack_frame(ax, xe, 2.8, 7.45, -1, "encoder\nlayer", "05")
    _stack_frame(ax, xd, 2.8, 9.85, 1, "decoder\nlayer", "07")
    _embedding(ax, xe, -1, "inputs (source tokens)")
    _embedding(ax, xd, 1, "outputs (target tokens, shifted right)")
    add_norm = "add & norm", "add & norm", "04", None
    ffn = "feed-forward", "feed-forward", "04", None
    _column(ax, xe, [(4.0, 0.8, "multi-head\nself-attention", "attention", "01 · 03", "qkv"),
                     (4.95, 0.5, *add_norm), (5.95, 0.8, *ffn), (6.9, 0.5, *add_norm)], -1, 2.55)
    _column(ax, xd, [
        (4.0, 0.8, "masked multi-head\nself-attention", "attention", "03 · 06", "qkv"),
        (4.95, 0.5, *add_norm),
        (6.35, 0.8, "cross-attention\n(encoder-decoder)", "attention", "07", "q"),
        (7.3, 0.5, *add_norm), (8.35, 0.8, *ffn), (9.3, 0.5, *add_norm)], 1, 2.55)
    # the encoder's output feeds every decoder layer's cross-attention as keys and values
    y_kv, x_mid = 5.65, 6.3
    ax.plot([xe, xe, x_mid, x_mid, xd - 0.4], [7.15, 8.2, 8.2, y_kv, y_kv], color=INK, lw=1.2,
            solid_capstyle="round")
    for dx, letter in [(-1.0, "K"), (-0.4, "V")]:
        _arrow(ax, (xd + dx, y_kv), (xd + dx, 5.95))
        ax.text(xd + dx + 0.07, 5.81, letter, fontsize=8, va="center")
    ax.text((xe + x_mid) / 2, 8.42, "encoder output (memory)", ha="center", va="center",
            fontsize=9, style="italic", color=MUTED)
    _column(ax, xd, [(10.7, 0.6, "linear", "output layer", "08", None),
                     (11.8, 0.6, "softmax", "output layer", "08", None)], 1, 9.55)
    _arrow(ax, (xd, 12.1), (xd, 12.55))
    ax.text(xd, 12.85, "output probabilities (next target token)", ha="center", va="center",
            fontsize=10.5)
    ax.text(xd, 13.35, "trained in 09 · decoded token by token in 10 · inspected in 11",
            ha="center", va="center", fontsize=9, color=MUTED)
    handles = [Patch(facecolor=c, edgecolor=EDGE, label=k) for k, c in BLOCK_COLOURS.items()]
    handles.append(Patch(facecolor=BADGE, label="number of the notebook that teaches it"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, 0.98), fontsize=9.5,
              frameon=False, title="kind of block", title_fontsize=10, alignment="left")
    ax.set_title("The Transformer at a glance (after Figure 1 of Vaswani et al., 2017)",
                 fontsize=13)
    ax.text(6.5, -0.5, "the whole model is assembled in notebook 08 · N = 6 layers in the paper",
            ha="center", va="center", fontsize=9, color=MUTED)
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=0.96)
    return fig


def recurrence_vs_attention_figure(n: int = 6):
    """Why attention replaced recurrence (section 4 of the paper), for ``n`` tokens. Left: a
    recurrent network, where x_1 reaches position n through n - 1 sequential steps. Right:
    self-attention, where every position reads every other directly, all at once."""
    if n < 2:
        raise ValueError(f"draw at least 2 positions, got n={n}")
    fig, (ax_rnn, ax_att) = plt.subplots(1, 2, figsize=(11.0, 3.6), layout="constrained")
    xs = np.arange(n)
    for ax in (ax_rnn, ax_att):
        ax.set(xlim=(-0.6, n - 0.4), ylim=(-0.55, 1.6))
        ax.axis("off")
        for x in xs:
            ax.text(x, 0, f"$x_{{{x + 1}}}$", ha="center", va="center", fontsize=11,
                    bbox=dict(boxstyle="round", facecolor=BLOCK_COLOURS["embedding"]))
    for x in xs:  # recurrent: x_t -> h_t, h_{t-1} -> h_t
        ax_rnn.text(x, 1, f"$h_{{{x + 1}}}$", ha="center", va="center", fontsize=11,
                    bbox=dict(boxstyle="round", facecolor=BLOCK_COLOURS["feed-forward"]))
        _arrow(ax_rnn, (x, 0.2), (x, 0.78), color=HIGHLIGHT if x == 0 else FAINT)
        if x:
            _arrow(ax_rnn, (x - 0.72, 1), (x - 0.28, 1), color=HIGHLIGHT, lw=2)
    ax_rnn.set_title(f"recurrence: $x_1$ reaches position {n} after {n - 1} steps,\n"
                     "taken one after another", fontsize=11)
    for i in xs:  # self-attention: every output reads every input
        ax_att.text(i, 1, f"$y_{{{i + 1}}}$", ha="center", va="center", fontsize=11,
                    bbox=dict(boxstyle="round", facecolor=BLOCK_COLOURS["attention"]))
        for j in xs:
            first_to_last = (i, j) == (n - 1, 0)
            ax_att.plot([j, i], [0.2, 0.8], color=HIGHLIGHT if first_to_last else FAINT,
                        lw=2 if first_to_last else 0.7, zorder=2 if first_to_last else 1)
    ax_att.set_title(f"self-attention: $x_1$ reaches position {n} in 1 step,\n"
                     "all positions computed at once", fontsize=11)
    return fig
