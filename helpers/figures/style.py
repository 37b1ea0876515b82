"""The course's look in one place: the palette, one array converter, one heatmap, one boolean
grid, the loss curves and the boxes of diagrams. Colours keep their meaning across notebooks:
weights are blue, a blocked (masked) cell is always the same light grey, orange is what a figure
points at.
"""

import math

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import ticker
from matplotlib.colors import ListedColormap
from matplotlib.patches import FancyBboxPatch, Patch

# ---- the palette
WEIGHTS_CMAP = "Blues"  # sequential: attention weights and probabilities live in [0, 1]
SIGNED_CMAP = "RdBu_r"  # diverging, centred on 0: red positive, blue negative
SCORE_CMAP = "Greens"  # accuracies in [0, 1]
BLOCKED = "#e3e3e3"  # a masked cell, a padding token, an ignored position: everywhere the same
MAY_ATTEND = "#2b6cb0"  # an allowed cell; also the course's main line colour
MAY_ATTEND_LIGHT = "#b9d3ec"  # allowed, but not the row a figure is about
HIGHLIGHT = "#e6550d"  # orange: the row being decoded, the best hypothesis
INK = "#333333"  # lines and arrows of diagrams
MUTED = "#555555"  # secondary text of diagrams
BADGE = "#37474f"  # the notebook-number badges of the architecture figure
EDGE = "#444444"  # outlines of diagram boxes
FAINT = "#9e9e9e"  # what a figure does not point at: frames, other paths, cell edges
FRAME = "#f4f4f4"  # the background of a repeated stack
CONTRAST = ("#d62728", "#1f77b4")  # two things compared: (without, with) a fix
LEVELS = ("#c05621", "#2f855a", "#6b46c1")  # reference lines drawn across a plot
MASK_COLOURS = {"blocked": BLOCKED, "may attend": MAY_ATTEND}
TOKEN_COLOURS = {"<pad>": BLOCKED, "<bos>": "#c4e6c1", "<eos>": "#f9c89b", "<unk>": "#f4a6a6"}
BLOCK_COLOURS = {"attention": "#f9c89b", "add & norm": "#f7ec9c", "feed-forward": "#a9d1f0",
                 "embedding": "#f5bfd0", "positional encoding": "#c4e6c1",
                 "output layer": "#d5c6ee"}  # the kinds of block of the architecture figure
NORM_COLOURS = {"post-norm": "#dd8452", "pre-norm": "#4c72b0",
                "without residual": "#c44e52", "with residual": "#55a868"}
BEAM_COLOURS = {"kept": ("#cfe3f7", "#3b75af", 1.0), "finished": ("#c9ebc4", "#2e8b3a", 1.0),
                "pruned": ("#f2f2f2", "#9a9a9a", 0.35)}  # status -> (face, edge colour, alpha)
RANK_COLOURS = ("#a9d1f0", "#f9c89b", "#c4e6c1", "#d5c6ee")  # processes of a distributed run
COLLECTIVE = "#f7ec9c"  # an operation of all the processes together (an all-reduce)
MAX_TICKS = 20  # an axis with more entries than this shows every k-th tick label only


def as_array(values, name: str = "values", ndim=None, dtype=float, hint: str = "") -> np.ndarray:
    """A tensor or array-like as a NumPy array. With ``ndim``, leading axes of size 1 are dropped
    (and 1-D becomes one row for ``ndim=2``); any other number of axes is a ``ValueError``."""
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    array = np.asarray(values, dtype=dtype)
    if ndim is not None:
        while array.ndim > ndim and array.shape[0] == 1:
            array = array[0]
        if ndim == 2 and array.ndim == 1:
            array = array[None, :]
        if array.ndim != ndim:
            raise ValueError(f"{name} must have {ndim} axes, got shape {array.shape}{hint}")
    return array


def set_ticks(ax, axis: str, n: int, labels=None) -> None:
    """Tick every entry of a short axis, every k-th one (k = 1, 2, 5, 10, 20, ...) of a long one."""
    if labels is not None and len(labels) != n:
        raise ValueError(f"{len(labels)} {axis} labels given for an axis of {n} entries")
    step, k = 1, 0
    while math.ceil(n / step) > MAX_TICKS:
        k += 1
        step = (1, 2, 5)[k % 3] * 10 ** (k // 3)
    positions = list(range(0, n, step))
    texts = [str(labels[i]) if labels is not None else str(i) for i in positions]
    if axis == "x":
        rotate = labels is not None and any(len(t) > 4 for t in texts)  # long words
        ax.set_xticks(positions, texts, rotation=90 if rotate else 0)
    else:
        ax.set_yticks(positions, texts)
    ax.tick_params(length=2, labelsize=9 if n <= MAX_TICKS else 8)


def new_axes(rows: int, cols: int, extra_width: float = 0.0):
    """A figure sized to a (rows, cols) grid: cells readable when small, bounded when large."""
    width = min(max(0.7 * cols + 2.2, 4.0), 8.0) + extra_width
    height = min(max(0.7 * rows + 1.2, 3.0), 7.0)
    return plt.subplots(figsize=(width, height), layout="constrained")


def cell_lines(ax, rows: int, cols: int) -> None:
    """Thin white lines between the cells of a grid drawn with ``imshow``."""
    ax.set_xticks(np.arange(cols + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(rows + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=1.5)
    ax.tick_params(which="minor", length=0)


def legend_patches(colours: dict) -> list:
    """Legend handles for ``{label: colour}``, in reverse order (the "on" colour first)."""
    return [Patch(facecolor=colour, edgecolor="grey", label=label)
            for label, colour in colours.items()][::-1]


def box(ax, x, y, width, height, text, colour, style, fontsize=9, text_colour=INK, edge=EDGE,
        **patch):
    """A block of a diagram: a rounded box of ``style`` centred at (x, y), ``text`` inside."""
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height, boxstyle=style,
                                facecolor=colour, edgecolor=edge, **patch))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, color=text_colour)


def heatmap(ax, values, x_labels=None, y_labels=None, *, vmin=0.0, vmax=1.0,
            cmap=WEIGHTS_CMAP, blocked=None, annotate=False, hide_below=None, fontsize=8):
    """``values`` ``(rows, columns)`` as an image on ``ax``, cells where ``blocked`` is True grey;
    ``annotate`` writes the values (not those below ``hide_below``). Returns the image."""
    values = as_array(values, "values", ndim=2)
    rows, cols = values.shape
    hidden = np.zeros(values.shape, bool) if blocked is None else np.broadcast_to(
        as_array(blocked, "blocked", dtype=bool), values.shape)
    colours = plt.get_cmap(cmap).with_extremes(bad=BLOCKED)
    image = ax.imshow(np.ma.masked_array(values, hidden), cmap=colours, vmin=vmin, vmax=vmax,
                      interpolation="nearest", aspect="equal" if max(rows, cols) <= 40 else "auto")
    set_ticks(ax, "x", cols, x_labels)
    set_ticks(ax, "y", rows, y_labels)
    if annotate:
        for (i, j), value in np.ndenumerate(values):
            if not hidden[i, j] and (hide_below is None or value >= hide_below):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=fontsize,
                        color="white" if value > vmin + 0.6 * (vmax - vmin) else "black")
    return image


def bool_grid(ax, grid, row_labels=None, column_labels=None, title=None, numbers=True):
    """A boolean grid (True = may attend) in ``MASK_COLOURS``, white lines between big enough
    cells; ``numbers`` writes 1 or 0 in each cell of a small grid."""
    grid = as_array(grid, "mask", ndim=2, dtype=bool)
    rows, columns = grid.shape
    ax.imshow(grid.astype(int), cmap=ListedColormap([BLOCKED, MAY_ATTEND]), vmin=0, vmax=1,
              interpolation="nearest", aspect="equal" if max(rows, columns) <= 40 else "auto")
    if numbers and rows * columns <= 400:
        size = 11 if max(rows, columns) <= 8 else 8
        for (i, j), allowed in np.ndenumerate(grid):
            ax.text(j, i, str(int(allowed)), ha="center", va="center", fontsize=size,
                    color="white" if allowed else "dimgrey")
    set_ticks(ax, "x", columns, column_labels)
    set_ticks(ax, "y", rows, row_labels)
    if max(rows, columns) <= 30:
        cell_lines(ax, rows, columns)
    ax.set_title(title, fontsize=10)


def loss_curves_figure(curves, ylabel, figsize, title=None, title_size="large", colours=None,
                       styles=("-",), log=True, layout="constrained"):
    """One line per entry of ``curves`` (label -> losses from step 1); several runs ``(runs,
    steps)`` are drawn as their median in a band from the lowest to the highest. ``colours``
    maps the start of a label to its colour; ``layout=None`` means ``tight_layout``."""
    fig, ax = plt.subplots(figsize=figsize, layout=layout)
    for i, (label, losses) in enumerate(curves.items()):
        losses = np.asarray(losses, dtype=float)
        runs = as_array(losses, label, ndim=2) if losses.ndim == 2 else None
        line = np.median(runs, axis=0) if runs is not None else as_array(losses, label, ndim=1)
        steps = np.arange(1, len(line) + 1)
        colour = next((c for key, c in (colours or {}).items() if label.startswith(key)), None)
        drawn, = ax.plot(steps, line, styles[i % len(styles)], color=colour, lw=1.5,
                         label=label if runs is None else f"{label} (median of {len(runs)})")
        if runs is not None:
            ax.fill_between(steps, runs.min(axis=0), runs.max(axis=0), color=drawn.get_color(),
                            alpha=0.2, lw=0)
    if log:
        ax.set_yscale("log")
    ax.set(xlabel="training step", ylabel=ylabel)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9)
    ax.set_title(title, fontsize=title_size)
    if layout is None:
        fig.tight_layout()
    return fig


def log_loss_axis(ax, ticks, title=None):
    """Finish an axis of training losses: log scale, labelled at those ``ticks`` it spans."""
    ax.set_yscale("log")
    low, high = ax.get_ylim()
    ax.set_yticks([t for t in ticks if low <= t <= high])
    ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set(xlabel="training step", ylabel="training loss (log scale)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=9)
    ax.set_title(title, fontsize=11)


def integer_axis(axis, nbins="auto") -> None:
    """Ticks at whole numbers only (layers, positions, dimensions)."""
    axis.set_major_locator(ticker.MaxNLocator(integer=True, nbins=nbins))
