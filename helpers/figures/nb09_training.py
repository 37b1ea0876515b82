"""Training: corpus lengths, batches, label smoothing, the schedule and the loss (notebook 09)."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from .style import (
    BLOCKED,
    FAINT,
    LEVELS,
    MAY_ATTEND,
    MUTED,
    TOKEN_COLOURS,
    integer_axis,
    log_loss_axis,
)


def sentence_length_figure(lengths, title=None):
    """Histograms of sentence lengths in words, one per entry of ``lengths`` (label -> list)."""
    fig, ax = plt.subplots(figsize=(7, 3.4), layout="constrained")
    values = {label: np.asarray(v, dtype=int) for label, v in lengths.items()}
    if not values or any(v.size == 0 for v in values.values()):
        raise ValueError("expected at least one non-empty list of lengths")
    low = min(v.min() for v in values.values())
    high = max(v.max() for v in values.values())
    ax.hist(list(values.values()), bins=np.arange(low - 0.5, high + 1.5), edgecolor="white",
            label=[f"{label} (mean {v.mean():.1f})" for label, v in values.items()])
    ax.set(xlabel="sentence length (words)", ylabel="sentences")
    integer_axis(ax.xaxis)
    ax.legend(fontsize=9)
    ax.set_title(title, fontsize=11)
    return fig


def batch_tokens_figure(grids, titles=None):
    """Token grids (2-D lists of strings, rows = sentences) one above the other, one word per
    cell, special tokens in ``TOKEN_COLOURS``: e.g. a batch's ``src``, ``tgt_in``, ``tgt_out``."""
    grids = [[list(row) for row in grid] for grid in grids]
    if not grids or any(not grid or len({len(r) for r in grid}) != 1 for grid in grids):
        raise ValueError("expected a list of rectangular, non-empty 2-D lists of tokens")
    titles = titles or [None] * len(grids)
    widest = max(len(grid[0]) for grid in grids)
    rows = max(len(grid) for grid in grids)
    fig, axes = plt.subplots(len(grids), 1, squeeze=False,
                             figsize=(max(1.05 * widest, 6), (0.42 * rows + 0.8) * len(grids)),
                             layout="constrained")
    for ax, grid, title in zip(axes[:, 0], grids, titles, strict=True):
        for i, row in enumerate(grid):
            for j, token in enumerate(row):
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, edgecolor=FAINT, lw=0.8,
                                       facecolor=TOKEN_COLOURS.get(token, "white")))
                ax.text(j, i, token, ha="center", va="center", fontsize=8,
                        color=MUTED if token == "<pad>" else "black")
        ax.set(xlim=(-0.5, widest - 0.5), ylim=(len(grid) - 0.5, -0.5),
               xticks=range(len(grid[0])), yticks=range(len(grid)))
        ax.set_xlabel("position", fontsize=9)
        ax.set_ylabel("sentence", fontsize=9)
        ax.tick_params(labelsize=8, length=0)
        ax.spines[:].set_visible(False)
        ax.set_title(title, fontsize=10, loc="left")
    return fig


def label_smoothing_figure(distributions, vocab_labels, label_index, title=None):
    """Target distributions (label -> V probabilities, e.g. one-hot and smoothed) as grouped
    bars, one group per token; the tick of the right token ``label_index`` is bold."""
    dists = {k: np.asarray(v, dtype=float) for k, v in distributions.items()}
    V = len(vocab_labels)
    if any(d.shape != (V,) for d in dists.values()):
        raise ValueError(f"every distribution must have {V} values, one per vocabulary label")
    fig, ax = plt.subplots(figsize=(max(7, 0.6 * V + 2), 3.6), layout="constrained")
    width = 0.8 / len(dists)
    for k, (name, d) in enumerate(dists.items()):
        x = np.arange(V) - 0.4 + width * (k + 0.5)
        bars = ax.bar(x, d, width, label=name)
        for xi, value in zip(x, d, strict=True):
            ax.text(xi, value + 0.02, f"{value:.3f}".rstrip("0").rstrip("."), ha="center",
                    va="bottom", fontsize=7, color=bars.patches[0].get_facecolor())
    ax.set_xticks(range(V), vocab_labels, rotation=45 if V > 8 else 0,
                  ha="right" if V > 8 else "center")
    ax.get_xticklabels()[label_index].set_fontweight("bold")
    ax.set(ylim=(0, 1.12), xlabel="vocabulary (bold: the right next token)",
           ylabel="target probability")
    ax.legend(fontsize=9, loc="upper left")
    ax.set_title(title, fontsize=11)
    return fig


def per_position_loss_figure(losses, labels, ignored, title=None):
    """One bar per target position: its loss, with ignored (padding) positions marked at 0."""
    losses = np.asarray(losses, dtype=float)
    ignored = np.asarray(ignored, dtype=bool)
    if not (losses.shape == ignored.shape == (len(labels),)):
        raise ValueError("losses, labels and ignored must have one entry per position")
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(labels) + 1.5), 3.2), layout="constrained")
    ax.bar(range(len(labels)), np.where(ignored, 0.0, losses),
           color=np.where(ignored, BLOCKED, MAY_ATTEND), edgecolor=FAINT)
    for j in np.flatnonzero(ignored):
        ax.text(j, 0.02 * max(losses.max(), 1e-9), "ignored", rotation=90, ha="center",
                va="bottom", fontsize=8, color=MUTED)
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set(xlabel="label (the next token) at each position", ylabel="loss")
    ax.set_title(title, fontsize=11)
    return fig


def lr_schedule_figure(curves, warmup, title=None):
    """Learning rate against step, one line per entry of ``curves`` (label -> lrs from step 1),
    each peak marked, a dotted line at ``step == warmup``."""
    fig, ax = plt.subplots(figsize=(7.5, 3.6), layout="constrained")
    for label, lrs in curves.items():
        lrs = np.asarray(lrs, dtype=float)
        steps = np.arange(1, len(lrs) + 1)
        line, = ax.plot(steps, lrs, label=label, lw=1.6)
        peak = int(lrs.argmax())
        ax.plot(steps[peak], lrs[peak], "o", color=line.get_color())
        ax.annotate(f"peak {lrs[peak]:.2e} at step {steps[peak]}", (steps[peak], lrs[peak]),
                    xytext=(8, 4), textcoords="offset points", fontsize=8,
                    color=line.get_color())
    ax.axvline(warmup, ls=":", color="grey")
    ax.text(warmup, ax.get_ylim()[0], f" warmup = {warmup}", color="grey", fontsize=8,
            va="bottom")
    ax.set(xlabel="step", ylabel="learning rate")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=9)
    ax.set_title(title, fontsize=11)
    return fig


def training_loss_figure(losses, window=25, levels=None, title=None, last_step=None):
    """Loss per step (thin) and its moving average over ``window`` steps (thick), log scale;
    ``levels`` (label -> value) are dashed lines, ``last_step`` fixes the x axis."""
    losses = np.asarray(losses, dtype=float)
    if losses.ndim != 1 or losses.size == 0:
        raise ValueError("expected a non-empty 1-D sequence of losses")
    steps = np.arange(1, losses.size + 1)
    fig, ax = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
    ax.plot(steps, losses, lw=0.8, alpha=0.45, color=MAY_ATTEND, label="loss of each step")
    window = max(1, min(window, losses.size))
    smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
    ax.plot(steps[window - 1:], smooth, lw=2, color=MAY_ATTEND,
            label=f"moving average ({window} steps)")
    for (label, value), colour in zip((levels or {}).items(), LEVELS, strict=False):
        ax.axhline(value, ls="--", lw=1.2, color=colour, label=f"{label} = {value:.2f}")
    if last_step is not None:
        ax.set_xlim(0, last_step)
    log_loss_axis(ax, (0.25, 0.5, 1, 2, 3, 4, 6, 8, 12), title)
    return fig


class LiveLoss:
    """An ``on_step`` callback for :func:`helpers.training.train`: every ``every`` steps and at
    ``last_step`` it redraws :func:`training_loss_figure` (``keyword`` arguments go there) in
    place, in one output with a display id, so a saved notebook keeps the final curve."""

    def __init__(self, last_step, every=25, **keyword):
        if last_step < 1 or every < 1:
            raise ValueError(f"expected last_step >= 1 and every >= 1, got {last_step}, {every}")
        self.last_step, self.every, self.keyword = last_step, every, keyword
        self.losses, self.handle = [], None

    def __call__(self, step, loss):
        self.losses.append(loss)
        if step % self.every and step != self.last_step:
            return
        from IPython.display import display  # here: helpers.figures imports without IPython

        title = f"{self.keyword.get('title') or 'Training loss'}: step {step} of {self.last_step}"
        fig = training_loss_figure(self.losses, **{**self.keyword, "title": title},
                                   last_step=self.last_step)
        plt.close(fig)  # shown by the display below only, not again when the cell ends
        if self.handle is None:
            self.handle = display(fig, display_id=True)
        else:
            self.handle.update(fig)
