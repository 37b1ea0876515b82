"""Figures for the notebooks. Functions here only draw: arguments in, ``matplotlib`` figure out.

No model code lives here; every function is tested without widgets (tests/test_plotting*.py).
"""

import matplotlib.pyplot as plt
import seaborn as sns

# ---- attention weights and softmax saturation (notebook 01)
# isort: split
import numpy as np

SATURATION_D_K = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def masked_attention_heatmap(weights, mask, x_labels=None, y_labels=None, title=None):
    """:func:`attention_heatmap` with the blocked cells greyed out and marked "×".

    ``mask`` is bool, broadcastable to the weights ``(Lq, Lk)``, True = may attend.
    """
    fig = attention_heatmap(weights, x_labels, y_labels, title=title)
    ax = fig.axes[0]
    blocked = ~np.broadcast_to(np.asarray(mask, dtype=bool), _to_2d(weights, "weights").shape)
    for text in list(ax.texts):  # no number in a blocked cell
        x, y = text.get_position()
        if blocked[round(y), round(x)]:
            text.remove()
    for i, j in zip(*np.nonzero(blocked), strict=True):
        ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, color=MASK_COLOURS["blocked"]))
        ax.text(j, i, "×", ha="center", va="center", fontsize=12, color="dimgrey")
    return fig


def _softmax(scores):
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_saturation_data(d_k, num_keys=10, num_queries=300, seed=0):
    """The numbers behind :func:`softmax_saturation_figure`, from random unit-variance q and k.

    Returns a dict with "unscaled" and "scaled": one query's softmax weights over ``num_keys``
    keys, sorted from largest to smallest, without and with the division by sqrt(d_k); "grid":
    the d_k values of the right panel; "max_unscaled" and "max_scaled": for each d_k in the grid,
    the largest weight of a row, averaged over ``num_queries`` random queries.
    """
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal(d_k), rng.standard_normal((num_keys, d_k))
    scores = k @ q  # (num_keys,), variance d_k
    data = {"unscaled": np.sort(_softmax(scores))[::-1],
            "scaled": np.sort(_softmax(scores / np.sqrt(d_k)))[::-1],
            "grid": np.array(SATURATION_D_K), "max_unscaled": [], "max_scaled": []}
    curve_rng = np.random.default_rng(seed + 1)  # its own stream: the curves never move with d_k
    for n in SATURATION_D_K:
        qs = curve_rng.standard_normal((num_queries, 1, n))
        ks = curve_rng.standard_normal((num_queries, num_keys, n))
        s = (qs * ks).sum(axis=-1)  # (num_queries, num_keys)
        data["max_unscaled"].append(_softmax(s).max(axis=-1).mean())
        data["max_scaled"].append(_softmax(s / np.sqrt(n)).max(axis=-1).mean())
    data["max_unscaled"] = np.array(data["max_unscaled"])
    data["max_scaled"] = np.array(data["max_scaled"])
    return data


def softmax_saturation_figure(d_k=64, num_keys=10, seed=0):
    """Why attention divides by sqrt(d_k): softmax weights with and without the scale.

    Left: one query's weights over ``num_keys`` random keys (sorted) at this ``d_k``.
    Right: the average largest weight of a row as d_k grows; the dashed line marks ``d_k``.
    """
    data = softmax_saturation_data(d_k, num_keys=num_keys, seed=seed)
    unscaled_colour, scaled_colour = "#d62728", "#1f77b4"
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    ranks = np.arange(1, num_keys + 1)
    left.bar(ranks - 0.2, data["unscaled"], width=0.4, color=unscaled_colour,
             label=f"softmax(q·k): largest {data['unscaled'][0]:.2f}")
    left.bar(ranks + 0.2, data["scaled"], width=0.4, color=scaled_colour,
             label=f"softmax(q·k / √d_k): largest {data['scaled'][0]:.2f}")
    left.axhline(1 / num_keys, color="grey", linestyle=":", label=f"uniform (1/{num_keys})")
    left.set(xticks=ranks, ylim=(0, 1.05), xlabel="keys, sorted by weight",
             ylabel="softmax weight", title=f"one query, {num_keys} random keys, d_k = {d_k}")
    left.legend(loc="upper right", fontsize=9)
    right.plot(data["grid"], data["max_unscaled"], "o-", color=unscaled_colour, label="q·k")
    right.plot(data["grid"], data["max_scaled"], "o-", color=scaled_colour, label="q·k / √d_k")
    right.axhline(1 / num_keys, color="grey", linestyle=":", label="uniform")
    right.axvline(d_k, color="black", linestyle="--", linewidth=1, label=f"d_k = {d_k}")
    right.set_xscale("log", base=2)
    right.set_xticks(data["grid"], [str(n) for n in data["grid"]])
    right.set(ylim=(0, 1.05), xlabel="d_k (log scale)", ylabel="largest weight in a row (mean)",
              title="the unscaled softmax saturates as d_k grows")
    right.legend(loc="best", fontsize=9)  # the curves move with num_keys
    fig.tight_layout()
    return fig


# ---- positional encoding (notebook 02)
# isort: split
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


def _pe_as_array(table) -> np.ndarray:
    """A torch tensor or array-like as a float NumPy array (on the CPU, detached)."""
    if hasattr(table, "detach"):
        table = table.detach().cpu()
    return np.asarray(table, dtype=float)


def plot_positional_encoding(pe, position=None, title=None):
    """Heatmap of a ``(positions, d_model)`` encoding table, one row per position.

    With ``position``, that row is outlined and drawn below as a vector over the columns
    (sine columns and cosine columns in two colours), aligned with the heatmap's columns.
    """
    table = _pe_as_array(pe)
    if table.ndim != 2:
        raise ValueError(f"pe must be a (positions, d_model) table, got shape {table.shape}")
    n, d = table.shape
    if position is not None and not 0 <= position < n:
        raise ValueError(f"position must be in 0..{n - 1} for a table of {n} positions")
    if position is None:
        fig, ax_map = plt.subplots(figsize=(9, 4.5), layout="constrained")
        axes = [ax_map]
    else:
        fig, (ax_map, ax_vec) = plt.subplots(
            2, 1, figsize=(9, 6.5), sharex=True, layout="constrained",
            gridspec_kw={"height_ratios": [3, 1.3]})
        axes = [ax_map, ax_vec]
    image = ax_map.imshow(table, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto",
                          interpolation="nearest", extent=(-0.5, d - 0.5, n - 0.5, -0.5))
    fig.colorbar(image, ax=axes, label="PE value", shrink=0.9)
    ax_map.set_ylabel("position p")
    ax_map.set_title(title or f"sinusoidal positional encoding: {n} positions x d_model = {d}")
    if position is None:
        ax_map.set_xlabel("dimension (column of the table)")
        ax_map.xaxis.set_major_locator(MaxNLocator(integer=True))
        return fig
    ax_map.add_patch(Rectangle((-0.5, position - 0.5), d, 1, fill=False, edgecolor="black",
                               linewidth=2.5))
    for x, marker in [(-0.5, ">"), (d - 0.5, "<")]:  # arrowheads outside, for long tables
        ax_map.plot([x], [position], marker=marker, color="black", markersize=9, clip_on=False)
    ax_map.set_title(title or f"sinusoidal positional encoding: {n} positions x d_model = {d}"
                     f" (outlined: position {position})")
    row, columns = table[position], np.arange(d)
    ax_vec.plot(columns, row, color="0.7", linewidth=1, zorder=1)
    ax_vec.scatter(columns[0::2], row[0::2], s=18, color="tab:orange", zorder=2,
                   label="even columns: sin")
    ax_vec.scatter(columns[1::2], row[1::2], s=18, color="tab:purple", zorder=2,
                   label="odd columns: cos")
    ax_vec.axhline(0, color="0.85", linewidth=0.8, zorder=0)
    ax_vec.set_ylim(-1.2, 1.2)
    ax_vec.set_xlim(-0.5, d - 0.5)
    ax_vec.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax_vec.set_xlabel("dimension (column of the table)")
    ax_vec.set_ylabel(f"PE[{position}]")
    ax_vec.legend(loc="lower right", fontsize=8, ncol=2, framealpha=0.9)
    return fig


def plot_pe_wavelengths(wavelengths, base):
    """Wavelength (in positions) of each sin/cos column pair, on a log scale, with its bounds."""
    lam = _pe_as_array(wavelengths).ravel()
    pairs = np.arange(len(lam))
    fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
    ax.plot(pairs, lam, "o-", color="tab:blue", markersize=4, label="wavelength of pair i")
    ax.axhline(2 * np.pi, color="tab:green", linestyle="--",
               label=f"2$\\pi$ = {2 * np.pi:.2f} (pair 0, columns 0 and 1)")
    ax.axhline(2 * np.pi * base, color="tab:red", linestyle="--",
               label=f"2$\\pi$ x base = {2 * np.pi * base:,.0f} (never quite reached)")
    ax.set_yscale("log")
    ax.set_xlabel("pair index i (columns 2i and 2i+1)")
    ax.set_ylabel("wavelength (positions)")
    ax.set_title(f"Each pair turns at its own speed (base = {base:g}, d_model = {2 * len(lam)})")
    ax.legend(loc="upper left", fontsize=9)
    return fig


def plot_pe_similarity(similarity, anchors, max_offset):
    """Left: the ``(n, n)`` matrix of dot products PE(p) . PE(q). Right: the rows of a few
    ``anchors`` p against the offset k = q - p in ``-max_offset..max_offset``, on top of each other.
    """
    sim = _pe_as_array(similarity)
    n = sim.shape[0]
    if sim.ndim != 2 or sim.shape[1] != n:
        raise ValueError(f"similarity must be a square (n, n) matrix, got shape {sim.shape}")
    for p in anchors:
        if p - max_offset < 0 or p + max_offset >= n:
            raise ValueError(f"anchor {p} +- {max_offset} does not fit in 0..{n - 1}")
    fig, (ax_map, ax_line) = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained",
                                          gridspec_kw={"width_ratios": [1, 1.3]})
    vmax = np.abs(sim).max()
    image = ax_map.imshow(sim, cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="nearest")
    fig.colorbar(image, ax=ax_map, label="PE(p) . PE(q)", shrink=0.85)
    ax_map.set_xlabel("position q")
    ax_map.set_ylabel("position p")
    ax_map.set_title("dot product of every pair of positions")
    offsets = np.arange(-max_offset, max_offset + 1)
    styles = ["-", "--", ":", "-."]
    for j, p in enumerate(anchors):
        ax_map.plot([p - max_offset, p + max_offset], [p, p], color="black", linewidth=1)
        ax_line.plot(offsets, sim[p, p + offsets], linestyle=styles[j % len(styles)],
                     linewidth=3.5 - 0.8 * (j % 3), label=f"p = {p}")
    ax_line.axvline(0, color="0.8", linewidth=0.8, zorder=0)
    ax_line.set_xlabel("offset k = q - p")
    ax_line.set_ylabel("PE(p) . PE(p + k)")
    ax_line.set_title("the same curve for every p, symmetric in k")
    ax_line.legend(title="row (black lines, left)", fontsize=9)
    return fig


def plot_pe_rotation(pe, k, starts, pairs=(0, 1)):
    """Each column pair (2i, 2i+1) as points on the unit circle, one point per position,
    with arrows from ``PE[p]`` to ``PE[p + k]`` for each p in ``starts``: a step of k
    positions turns every arrow of a pair by the same angle, whatever p is.
    """
    table = _pe_as_array(pe)
    n, d = table.shape
    for i in pairs:
        if not 0 <= i < d // 2:
            raise ValueError(f"pair {i} does not exist for d_model = {d}")
    for p in starts:
        if p < 0 or p + k >= n:
            raise ValueError(f"start {p} + k = {p + k} is not a position of the table (0..{n - 1})")
    fig, axes = plt.subplots(1, len(pairs), figsize=(4.6 * len(pairs), 4.6), layout="constrained",
                             squeeze=False)
    circle = np.linspace(0, 2 * np.pi, 200)
    colours = plt.get_cmap("tab10")
    for ax, i in zip(axes[0], pairs, strict=True):
        x, y = table[:, 2 * i], table[:, 2 * i + 1]
        ax.plot(np.sin(circle), np.cos(circle), color="0.85", linewidth=1, zorder=0)
        points = ax.scatter(x, y, c=np.arange(n), cmap="viridis", s=14, zorder=1)
        for j, p in enumerate(starts):
            ax.annotate("", xy=(x[p + k], y[p + k]), xytext=(x[p], y[p]),
                        arrowprops={"arrowstyle": "->", "color": colours(j % 10), "lw": 2})
            ax.text(1.2 * x[p], 1.2 * y[p], f"p={p}", color=colours(j % 10), fontsize=9,
                    ha="center", va="center")
        ax.set_aspect("equal")
        ax.set_xlim(-1.35, 1.35)
        ax.set_ylim(-1.35, 1.35)
        ax.set_xlabel(f"PE[p, {2 * i}] (sin)")
        ax.set_ylabel(f"PE[p, {2 * i + 1}] (cos)")
        ax.set_title(f"pair i = {i}: arrows from p to p + {k}")
    fig.colorbar(points, ax=axes[0].tolist(), label="position p", shrink=0.8)
    return fig


# ---- multi-head attention: head split and merge, per-head weights (notebook 03)
def _head_split_arrays(d_model, num_heads, seq_len):
    """Head index behind each cell of the three panels of :func:`head_split_figure`.

    Returns ``(before, stacked, merged)``: ``before`` and ``merged`` are ``(seq_len, d_model)``
    with column ``c`` holding head ``c // d_k``; ``stacked`` is ``(seq_len, h * d_k + h - 1)``,
    the h ``(seq_len, d_k)`` blocks side by side with one NaN column between neighbours.
    """
    import numpy as np

    if num_heads < 1 or d_model % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
    d_k = d_model // num_heads
    before = np.tile(np.arange(d_model) // d_k, (seq_len, 1)).astype(float)
    stacked = np.full((seq_len, num_heads * (d_k + 1) - 1), np.nan)
    for head in range(num_heads):
        start = head * (d_k + 1)
        stacked[:, start:start + d_k] = head
    return before, stacked, before.copy()


def head_split_figure(d_model=24, num_heads=4, seq_len=5):
    """Split into heads and merge, drawn as coloured column blocks (one colour per head).

    Left: the projected ``(L, d_model)`` matrix, column ``c`` coloured by its head ``c // d_k``.
    Middle: the ``(h, L, d_k)`` stack after ``split_heads``, one ``(L, d_k)`` block per head, each
    x tick naming the original column. Right: the ``(L, d_model)`` matrix after ``merge_heads``.
    """
    import numpy as np
    from matplotlib.colors import ListedColormap

    before, stacked, merged = _head_split_arrays(d_model, num_heads, seq_len)
    d_k = d_model // num_heads
    cmap = ListedColormap(sns.color_palette("husl", num_heads))
    cmap.set_bad("white")
    widths = [d_model, stacked.shape[1], d_model]
    fig, axes = plt.subplots(1, 3, figsize=(15, 1.9 + 0.32 * seq_len),
                             gridspec_kw={"width_ratios": widths, "wspace": 0.12})
    tick_size = 7 if max(widths) <= 32 else 5
    titles = [f"projected X: (L, d_model) = ({seq_len}, {d_model})",
              f"split_heads: (h, L, d_k) = ({num_heads}, {seq_len}, {d_k})",
              f"merge_heads: (L, d_model) = ({seq_len}, {d_model})"]
    for ax, data, title in zip(axes, (before, stacked, merged), titles, strict=True):
        ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=-0.5, vmax=num_heads - 0.5,
                  aspect="auto", interpolation="nearest")
        ax.set_title(title, fontsize=10, pad=16)
        ax.set_yticks(range(seq_len))
        ax.set_yticklabels([])
        ax.tick_params(length=0)
        for x in np.arange(data.shape[1] + 1) - 0.5:  # thin white lines between cells
            ax.axvline(x, color="white", linewidth=0.6)
        for y in np.arange(seq_len + 1) - 0.5:
            ax.axhline(y, color="white", linewidth=0.6)
        for side in ax.spines.values():
            side.set_visible(False)
    axes[0].set_yticklabels([f"token {i}" for i in range(seq_len)], fontsize=8)
    for ax in (axes[0], axes[2]):
        ax.set_xticks(range(d_model))
        ax.set_xticklabels(range(d_model), fontsize=tick_size)
        for b in range(1, num_heads):  # head boundaries
            ax.axvline(b * d_k - 0.5, color="black", linewidth=1.5)
    block_starts = [head * (d_k + 1) for head in range(num_heads)]
    axes[1].set_xticks([s + j for s in block_starts for j in range(d_k)])
    axes[1].set_xticklabels([head * d_k + j for head in range(num_heads) for j in range(d_k)],
                            fontsize=tick_size)
    if num_heads <= 12:
        for head, start in enumerate(block_starts):
            axes[1].text(start + (d_k - 1) / 2, 1.01, f"head {head}" if num_heads <= 6 else head,
                         transform=axes[1].get_xaxis_transform(), ha="center", va="bottom",
                         fontsize=8)
    for ax in axes:
        ax.set_xlabel("column (feature) of d_model", fontsize=8)
    for left, right in ((axes[0], axes[1]), (axes[1], axes[2])):
        x0, x1 = left.get_position().x1, right.get_position().x0
        y = left.get_position().y0 + left.get_position().height / 2
        fig.text((x0 + x1) / 2, y, "\u2192", ha="center", va="center", fontsize=16)
    return fig


def head_weights_figure(weights, query_labels, key_labels, titles=None, vmax=1.0):
    """One heatmap per head: ``weights`` is ``(h, Lq, Lk)`` (one sequence), values in [0, 1].

    The colour scale runs from 0 to ``vmax`` (lower it to see small differences).
    """
    import numpy as np

    weights = np.asarray(weights.detach().cpu() if hasattr(weights, "detach") else weights)
    num_heads = weights.shape[0]
    titles = titles or [f"head {i}" for i in range(num_heads)]
    fig, axes = plt.subplots(1, num_heads + 1, figsize=(3.2 * num_heads + 1.0, 3.4),
                             gridspec_kw={"width_ratios": [1] * num_heads + [0.06]})
    axes, cbar_ax = axes[:-1], axes[-1]
    annotate = weights.shape[1] * weights.shape[2] <= 64
    for i, ax in enumerate(axes):
        sns.heatmap(weights[i], ax=ax, vmin=0.0, vmax=vmax, cmap="rocket_r", square=True,
                    annot=annotate, fmt=".2f", annot_kws={"fontsize": 7},
                    cbar=i == 0, cbar_ax=cbar_ax, cbar_kws={"label": "attention weight"},
                    xticklabels=key_labels, yticklabels=query_labels if i == 0 else False)
        ax.set_title(titles[i], fontsize=10)
        ax.set_xlabel("key")
        ax.tick_params(axis="x", labelrotation=90)
        ax.tick_params(axis="y", labelrotation=0)
    axes[0].set_ylabel("query")
    fig.tight_layout()
    return fig


# ---- generic heatmaps and the architecture figure (notebook 00)
import math  # noqa: E402

import numpy as np  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Patch  # noqa: E402

MAX_TICKS = 20  # an axis with more entries than this shows every k-th tick label only
WEIGHTS_CMAP = "Blues"  # sequential: attention weights live in [0, 1]
SIGNED_CMAP = "RdBu_r"  # diverging, centred on 0: red positive, blue negative
MASK_COLOURS = {"blocked": "#e3e3e3", "may attend": "#2b6cb0"}


def _to_2d(values, name: str) -> np.ndarray:
    """A tensor or array as a 2-D NumPy array; leading axes of size 1 are dropped."""
    if hasattr(values, "detach"):
        values = values.detach().cpu()
    array = np.asarray(values)
    while array.ndim > 2 and array.shape[0] == 1:
        array = array[0]
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise ValueError(f"{name} must be 2-D (rows, columns), got shape {array.shape}")
    return array


def _tick_step(n: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that leaves at most MAX_TICKS ticks on n entries."""
    step, k = 1, 0
    while math.ceil(n / step) > MAX_TICKS:
        k += 1
        step = (1, 2, 5)[k % 3] * 10 ** (k // 3)
    return step


def _set_ticks(ax, axis: str, n: int, labels=None) -> None:
    """Tick every entry of a short axis, every k-th one of a long axis (at most ~MAX_TICKS)."""
    if labels is not None and len(labels) != n:
        raise ValueError(f"{len(labels)} {axis} labels given for an axis of {n} entries")
    positions = list(range(0, n, _tick_step(n)))
    texts = [str(labels[i]) if labels is not None else str(i) for i in positions]
    if axis == "x":
        rotate = labels is not None and any(len(t) > 4 for t in texts)  # long words
        ax.set_xticks(positions, texts, rotation=90 if rotate else 0)
    else:
        ax.set_yticks(positions, texts)
    ax.tick_params(length=2, labelsize=9 if n <= MAX_TICKS else 8)


def _new_axes(rows: int, cols: int, extra_width: float = 0.0):
    """A figure sized to a (rows, cols) grid: cells readable when small, bounded when large."""
    width = min(max(0.7 * cols + 2.2, 4.0), 8.0) + extra_width
    height = min(max(0.7 * rows + 1.2, 3.0), 7.0)
    return plt.subplots(figsize=(width, height), layout="constrained")


def _draw_weights(ax, weights, x_labels, y_labels, title, annotate, vmax):
    """One heatmap of attention weights on ``ax``; returns the image."""
    Lq, Lk = weights.shape
    top = float(weights.max()) if vmax is None else vmax
    image = ax.imshow(weights, cmap=WEIGHTS_CMAP, vmin=0.0, vmax=top if top > 0 else 1.0,
                      interpolation="nearest", aspect="equal" if max(Lq, Lk) <= 40 else "auto")
    _set_ticks(ax, "x", Lk, x_labels)
    _set_ticks(ax, "y", Lq, y_labels)
    ax.set_xlabel("key" if x_labels is not None else "key position")
    ax.set_ylabel("query" if y_labels is not None else "query position")
    if title:
        ax.set_title(title)
    if annotate:
        for (i, j), w in np.ndenumerate(weights):
            ax.text(j, i, f"{w:.2f}", ha="center", va="center", fontsize=8,
                    color="white" if w > 0.6 * image.norm.vmax else "black")
    return image


def attention_heatmap(weights, x_labels=None, y_labels=None, title=None, ax=None, vmax=1.0):
    """Attention weights ``(Lq, Lk)`` as a heatmap: row i shows what query i looks at.

    Values are printed in the cells when the map is at most 8 x 8. The colour scale is fixed
    to [0, 1] so maps can be compared; ``vmax=None`` stretches it to the largest weight
    (useful for long sequences, where every weight is small).
    """
    weights = _to_2d(weights, "weights").astype(float)
    if ax is None:
        fig, ax = _new_axes(*weights.shape)
    small = max(weights.shape) <= 8
    image = _draw_weights(ax, weights, x_labels, y_labels, title, small, vmax)
    ax.figure.colorbar(image, ax=ax, label="attention weight", shrink=0.9)
    return ax.figure


def attention_heads(weights, x_labels=None, y_labels=None, titles=None, max_cols=4, vmax=1.0):
    """A grid of per-head attention maps from weights ``(h, Lq, Lk)`` (or ``(1, h, Lq, Lk)``).

    All heads share one colour scale and one colour bar.
    """
    if hasattr(weights, "detach"):
        weights = weights.detach().cpu()
    weights = np.asarray(weights, dtype=float)
    if weights.ndim == 4 and weights.shape[0] == 1:
        weights = weights[0]
    if weights.ndim != 3:
        raise ValueError(f"weights must be (h, Lq, Lk), got shape {weights.shape}")
    h, Lq, Lk = weights.shape
    if titles is not None and len(titles) != h:
        raise ValueError(f"{len(titles)} titles given for {h} heads")
    cols = max(1, min(h, max_cols))
    rows = math.ceil(h / cols)
    cell = min(max(0.3 * max(Lq, Lk) + 1.2, 2.4), 4.0)
    fig, axes = plt.subplots(rows, cols, figsize=(cols * cell + 1.0, rows * cell + 0.4),
                             layout="constrained", squeeze=False)
    top = float(weights.max()) if vmax is None else vmax
    for i, ax in enumerate(axes.flat):
        if i >= h:
            fig.delaxes(ax)
            continue
        title = titles[i] if titles is not None else f"head {i}"
        image = _draw_weights(ax, weights[i], x_labels, y_labels, title,
                              max(Lq, Lk) <= 4 and cols <= 2, top)
        if i % cols:
            ax.set_ylabel("")
        if i < h - cols:
            ax.set_xlabel("")
    fig.colorbar(image, ax=axes, label="attention weight", shrink=0.9)
    return fig


def positional_encoding_heatmap(pe, title=None, highlight_position=None):
    """The positional-encoding table ``(L, d_model)``: x = dimension, y = position.

    A diverging palette centred on 0. With ``highlight_position=p`` the row p is framed and
    its vector is drawn underneath, even (sine) and odd (cosine) dimensions in two colours.
    """
    pe = _to_2d(pe, "pe").astype(float)
    L, d_model = pe.shape
    limit = float(np.abs(pe).max()) or 1.0
    width = min(max(0.3 * d_model + 2.5, 5.0), 9.0)
    height = min(max(0.25 * L + 1.5, 3.0), 5.0)
    if highlight_position is None:
        fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    else:
        if not 0 <= highlight_position < L:
            raise ValueError(f"highlight_position must be in 0..{L - 1}, got {highlight_position}")
        fig, (ax, ax_row) = plt.subplots(2, 1, figsize=(width, height + 2.2), sharex=True,
                                         height_ratios=[height, 2.0], layout="constrained")
    image = ax.imshow(pe, cmap=SIGNED_CMAP, vmin=-limit, vmax=limit, aspect="auto",
                      interpolation="nearest")
    fig.colorbar(image, ax=ax, label="value", shrink=0.9)
    _set_ticks(ax, "x", d_model)
    _set_ticks(ax, "y", L)
    ax.set_ylabel("position")
    ax.set_title(title or f"Positional encoding ({L} positions, d_model = {d_model})")
    if highlight_position is None:
        ax.set_xlabel("dimension")
        return fig
    p = highlight_position
    ax.add_patch(plt.Rectangle((-0.5, p - 0.5), d_model, 1, fill=False, edgecolor="black", lw=2))
    dims = np.arange(d_model)
    marker = 4 if d_model <= 64 else 0  # markers only while they can be told apart
    ax_row.axhline(0, color="grey", lw=0.8)
    ax_row.plot(dims[0::2], pe[p, 0::2], "o-", ms=marker, lw=1, color="#c0392b", label="even (sin)")
    ax_row.plot(dims[1::2], pe[p, 1::2], "s-", ms=marker, lw=1, color="#2471a3", label="odd (cos)")
    ax_row.set_ylim(-1.15 * limit, 1.75 * limit)  # headroom for the legend
    ax_row.set_xlabel("dimension")
    ax_row.set_ylabel(f"PE[{p}]")
    ax_row.legend(loc="upper right", ncols=2, fontsize=8)
    return fig


def mask_heatmap(mask, x_labels=None, y_labels=None, title=None):
    """A boolean mask ``(Lq, Lk)``, True = may attend: which key each query may look at."""
    mask = _to_2d(mask, "mask").astype(bool)
    Lq, Lk = mask.shape
    fig, ax = _new_axes(Lq, Lk, extra_width=1.2)  # room for the legend
    cmap = ListedColormap([MASK_COLOURS["blocked"], MASK_COLOURS["may attend"]])
    ax.imshow(mask.astype(int), cmap=cmap, vmin=0, vmax=1, interpolation="nearest",
              aspect="equal" if max(Lq, Lk) <= 40 else "auto")
    if max(Lq, Lk) <= 30:  # thin white lines between cells
        ax.set_xticks(np.arange(-0.5, Lk), minor=True)
        ax.set_yticks(np.arange(-0.5, Lq), minor=True)
        ax.grid(which="minor", color="white", lw=1)
        ax.tick_params(which="minor", length=0)
    _set_ticks(ax, "x", Lk, x_labels)
    _set_ticks(ax, "y", Lq, y_labels)
    ax.set_xlabel("key" if x_labels is not None else "key position")
    ax.set_ylabel("query" if y_labels is not None else "query position")
    if title:
        ax.set_title(title)
    handles = [Patch(facecolor=colour, edgecolor="grey", label=label)
               for label, colour in MASK_COLOURS.items()][::-1]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return fig


# One colour per kind of block in the architecture figure.
BLOCK_COLOURS = {
    "attention": "#f9c89b",
    "add & norm": "#f7ec9c",
    "feed-forward": "#a9d1f0",
    "embedding": "#f5bfd0",
    "positional encoding": "#c4e6c1",
    "output layer": "#d5c6ee",
}
_ARROW = dict(arrowstyle="-|>", mutation_scale=12, color="#333333", lw=1.2, shrinkA=0, shrinkB=0)


def _arch_arrow(ax, start, end, **style):
    ax.add_patch(FancyArrowPatch(start, end, **{**_ARROW, **style}))


def _arch_line(ax, xs, ys, arrow=True):
    """A polyline through (xs, ys); with ``arrow`` its last segment ends in an arrow head."""
    last = -1 if arrow else len(xs)
    ax.plot(xs[:last], ys[:last], color="#333333", lw=1.2, solid_capstyle="round")
    if arrow:
        _arch_arrow(ax, (xs[-2], ys[-2]), (xs[-1], ys[-1]))


def _arch_box(ax, x, y, w, h, text, kind, tag=None, tag_x=None):
    """A rounded block centred at (x, y), coloured by its kind, with a notebook tag beside it."""
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, zorder=2,
                                boxstyle="round,pad=0,rounding_size=0.12",
                                facecolor=BLOCK_COLOURS[kind], edgecolor="#444444", lw=1.2))
    ax.text(x, y, text, ha="center", va="center", fontsize=10.5, zorder=3)
    if tag:
        _arch_tag(ax, tag_x, y, tag)


def _arch_tag(ax, x, y, text):
    """A dark badge with the number of the notebook that teaches a block."""
    ax.text(x, y, text, ha="center", va="center", fontsize=9, color="white", fontweight="bold",
            zorder=4, bbox=dict(boxstyle="round,pad=0.25", facecolor="#37474f", edgecolor="none"))


def _arch_column(ax, x, blocks, side, tag_x, start_y):
    """Draw one stack bottom to top: blocks, the main line between them, residual paths.

    ``blocks``: (centre y, height, text, kind, tag, inputs) tuples, where ``inputs`` is "qkv"
    (self-attention: the main line forks into Q, K and V), "q" (cross-attention: only Q comes
    from below) or None. A residual path leaves the main line below every sub-layer, runs on
    ``side`` (-1 left, +1 right) and enters the "add & norm" block above it. The main line
    enters the first block from ``start_y``.
    """
    w = 3.0
    for i, (y, h, text, kind, tag, inputs) in enumerate(blocks):
        _arch_box(ax, x, y, w, h, text, kind, tag, tag_x)
        bottom = y - h / 2
        below = blocks[i - 1][0] + blocks[i - 1][1] / 2 if i else start_y  # top of the one below
        if inputs == "qkv":  # fork into three arrows from a bar under the block
            ax.plot([x, x], [below, bottom - 0.3], color="#333333", lw=1.2)
            ax.plot([x - 0.75, x + 0.75], [bottom - 0.3] * 2, color="#333333", lw=1.2)
            for dx, letter in [(-0.75, "Q"), (0.0, "K"), (0.75, "V")]:
                _arch_arrow(ax, (x + dx, bottom - 0.3), (x + dx, bottom))
                ax.text(x + dx + 0.07, bottom - 0.14, letter, fontsize=8, va="center")
        else:
            _arch_arrow(ax, (x, below), (x, bottom))
            if inputs == "q":
                ax.text(x + 0.07, bottom - 0.14, "Q", fontsize=8, va="center")
        if kind == "add & norm":  # residual: from below the previous sub-layer into this block
            sub_bottom = blocks[i - 1][0] - blocks[i - 1][1] / 2
            y_fork = sub_bottom - (0.55 if blocks[i - 1][5] else 0.25)
            x_side = x + side * (w / 2 + 0.35)
            ax.plot([x], [y_fork], "o", ms=3.5, color="#333333", zorder=3)
            _arch_line(ax, [x, x_side, x_side, x + side * w / 2], [y_fork, y_fork, y, y])


def _arch_embedding(ax, x, side, label):
    """Tokens -> embedding -> + positional encoding, at the bottom of a column."""
    ax.text(x, 0.0, label, ha="center", va="center", fontsize=10.5)
    _arch_arrow(ax, (x, 0.25), (x, 0.75))
    name = "input embedding" if side < 0 else "output embedding"
    _arch_box(ax, x, 1.05, 3.0, 0.6, name, "embedding", "05", x - side * 2.05)
    _arch_arrow(ax, (x, 1.35), (x, 2.05))
    ax.add_patch(Circle((x, 2.3), 0.25, facecolor="white", edgecolor="#333333", lw=1.2, zorder=3))
    ax.text(x, 2.3, "+", ha="center", va="center", fontsize=14, zorder=4)
    xc = x + side * 1.45  # the positional encoding: a sine wave in a circle
    ax.add_patch(Circle((xc, 2.3), 0.38, facecolor=BLOCK_COLOURS["positional encoding"],
                        edgecolor="#444444", lw=1.2, zorder=3))
    t = np.linspace(-0.28, 0.28, 50)
    ax.plot(xc + t, 2.3 + 0.16 * np.sin(t * 2 * np.pi / 0.28), color="#1b5e20", lw=1.2, zorder=4)
    _arch_arrow(ax, (x + side * 1.07, 2.3), (x + side * 0.25, 2.3))
    ax.text(xc + side * 0.5, 2.3, "positional\nencoding", ha="right" if side < 0 else "left",
            va="center", fontsize=9.5)
    _arch_tag(ax, xc, 1.72, "02")


def _arch_stack_frame(ax, x, y0, y1, side, name, tag):
    """The grey frame of a layer repeated N times, labelled on the outer side."""
    ax.add_patch(FancyBboxPatch((x - 2.15, y0), 4.3, y1 - y0, zorder=1,
                                boxstyle="round,pad=0,rounding_size=0.25",
                                facecolor="#f4f4f4", edgecolor="#9e9e9e", lw=1.3))
    x_text = x + side * 2.35
    ha = "right" if side < 0 else "left"
    ax.text(x_text, (y0 + y1) / 2 + 0.45, "N ×", ha=ha, va="center", fontsize=14,
            fontweight="bold")
    ax.text(x_text, (y0 + y1) / 2 - 0.2, name, ha=ha, va="center", fontsize=10, style="italic",
            color="#555555")
    _arch_tag(ax, x_text + side * 0.3, (y0 + y1) / 2 - 0.85, tag)


def architecture_figure():
    """The encoder-decoder Transformer at a glance, after Figure 1 of Vaswani et al. (2017).

    Redrawn for the course: one colour per kind of block, residual paths drawn as side
    branches, and each block tagged with the number of the notebook that teaches it.
    """
    fig, ax = plt.subplots(figsize=(11.0, 11.0))
    ax.set_xlim(-0.2, 13.2)
    ax.set_ylim(-0.6, 14.4)
    ax.set_aspect("equal")
    ax.axis("off")
    xe, xd = 3.4, 9.2  # centres of the encoder and decoder columns

    _arch_stack_frame(ax, xe, 2.8, 7.45, -1, "encoder\nlayer", "05")
    _arch_stack_frame(ax, xd, 2.8, 9.85, 1, "decoder\nlayer", "07")
    _arch_embedding(ax, xe, -1, "inputs (source tokens)")
    _arch_embedding(ax, xd, 1, "outputs (target tokens, shifted right)")
    _arch_column(ax, xe, [
        (4.0, 0.8, "multi-head\nself-attention", "attention", "01 · 03", "qkv"),
        (4.95, 0.5, "add & norm", "add & norm", "04", None),
        (5.95, 0.8, "feed-forward", "feed-forward", "04", None),
        (6.9, 0.5, "add & norm", "add & norm", "04", None),
    ], side=-1, tag_x=xe + 2.05, start_y=2.55)
    _arch_column(ax, xd, [
        (4.0, 0.8, "masked multi-head\nself-attention", "attention", "03 · 06", "qkv"),
        (4.95, 0.5, "add & norm", "add & norm", "04", None),
        (6.35, 0.8, "cross-attention\n(encoder-decoder)", "attention", "07", "q"),
        (7.3, 0.5, "add & norm", "add & norm", "04", None),
        (8.35, 0.8, "feed-forward", "feed-forward", "04", None),
        (9.3, 0.5, "add & norm", "add & norm", "04", None),
    ], side=1, tag_x=xd - 2.05, start_y=2.55)

    # the encoder's output feeds every decoder layer's cross-attention as keys and values
    y_kv, x_mid = 5.65, 6.3
    _arch_line(ax, [xe, xe, x_mid, x_mid, xd - 0.4], [7.15, 8.2, 8.2, y_kv, y_kv], arrow=False)
    for dx, letter in [(-1.0, "K"), (-0.4, "V")]:
        _arch_arrow(ax, (xd + dx, y_kv), (xd + dx, 5.95))
        ax.text(xd + dx + 0.07, 5.81, letter, fontsize=8, va="center")
    ax.text((xe + x_mid) / 2, 8.42, "encoder output (memory)", ha="center", va="center",
            fontsize=9, style="italic", color="#555555")

    # output layer
    _arch_arrow(ax, (xd, 9.55), (xd, 10.4))
    _arch_box(ax, xd, 10.7, 3.0, 0.6, "linear", "output layer", "08", xd - 2.05)
    _arch_arrow(ax, (xd, 11.0), (xd, 11.5))
    _arch_box(ax, xd, 11.8, 3.0, 0.6, "softmax", "output layer", "08", xd - 2.05)
    _arch_arrow(ax, (xd, 12.1), (xd, 12.55))
    ax.text(xd, 12.85, "output probabilities (next target token)", ha="center", va="center",
            fontsize=10.5)
    ax.text(xd, 13.35, "trained in 09 · decoded token by token in 10 · inspected in 11",
            ha="center", va="center", fontsize=9, color="#555555")

    handles = [Patch(facecolor=c, edgecolor="#444444", label=k) for k, c in BLOCK_COLOURS.items()]
    handles.append(Patch(facecolor="#37474f", label="number of the notebook that teaches it"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, 0.98), fontsize=9.5,
              frameon=False, title="kind of block", title_fontsize=10, alignment="left")
    ax.set_title("The Transformer at a glance (after Figure 1 of Vaswani et al., 2017)",
                 fontsize=13)
    ax.text(6.5, -0.5, "the whole model is assembled in notebook 08 · N = 6 layers in the paper",
            ha="center", va="center", fontsize=9, color="#555555")
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=0.96)
    return fig


def recurrence_vs_attention_figure(n: int = 6):
    """Why attention replaced recurrence (section 4 of the paper), drawn for ``n`` tokens.

    Left: a recurrent network, where the state of position t needs the state of t - 1, so the
    first token reaches the last one through n - 1 sequential steps. Right: self-attention,
    where every position reads every other directly, all positions at once.
    """
    if n < 2:
        raise ValueError(f"draw at least 2 positions, got n={n}")
    fig, (ax_rnn, ax_att) = plt.subplots(1, 2, figsize=(11.0, 3.6), layout="constrained")
    xs = np.arange(n)
    highlight, plain = "#d35400", "#9e9e9e"
    for ax in (ax_rnn, ax_att):
        ax.set_xlim(-0.6, n - 0.4)
        ax.set_ylim(-0.55, 1.6)
        ax.axis("off")
        for x in xs:
            ax.text(x, 0, f"$x_{{{x + 1}}}$", ha="center", va="center", fontsize=11,
                    bbox=dict(boxstyle="round", facecolor=BLOCK_COLOURS["embedding"]))
    for x in xs:  # recurrent: x_t -> h_t, h_{t-1} -> h_t
        ax_rnn.text(x, 1, f"$h_{{{x + 1}}}$", ha="center", va="center", fontsize=11,
                    bbox=dict(boxstyle="round", facecolor=BLOCK_COLOURS["feed-forward"]))
        _arch_arrow(ax_rnn, (x, 0.2), (x, 0.78), color=highlight if x == 0 else plain)
        if x:
            _arch_arrow(ax_rnn, (x - 0.72, 1), (x - 0.28, 1), color=highlight, lw=2)
    ax_rnn.set_title(f"recurrence: $x_1$ reaches position {n} after {n - 1} steps,\n"
                     "taken one after another", fontsize=11)
    for i in xs:  # self-attention: every output reads every input
        ax_att.text(i, 1, f"$y_{{{i + 1}}}$", ha="center", va="center", fontsize=11,
                    bbox=dict(boxstyle="round", facecolor=BLOCK_COLOURS["attention"]))
        for j in xs:
            first_to_last = (i, j) == (n - 1, 0)
            ax_att.plot([j, i], [0.2, 0.8], color=highlight if first_to_last else plain,
                        lw=2 if first_to_last else 0.7, zorder=2 if first_to_last else 1)
    ax_att.set_title(f"self-attention: $x_1$ reaches position {n} in 1 step,\n"
                     "all positions computed at once", fontsize=11)
    return fig


# ---- encoder: embedding scale, attention of every layer and head (notebook 05)
def embedding_scale_figure(d_models, series, pe_rms):
    """Per-entry RMS of token embeddings against d_model, next to the positional encoding's.

    ``series`` maps a label to one RMS value per entry of ``d_models``; ``pe_rms`` is the
    positional encoding's RMS, drawn as a dashed black line. Both axes are logarithmic, so
    ``1/sqrt(d_model)`` and ``sqrt(d_model)`` are straight lines.
    """
    d_models = np.asarray(d_models, dtype=float)
    colours = sns.color_palette("colorblind", len(series))
    markers = "osD^v<>"
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    for k, (label, values) in enumerate(series.items()):
        ax.plot(d_models, np.asarray(values, dtype=float), marker=markers[k % len(markers)],
                color=colours[k], linewidth=2, label=label)
    ax.axhline(pe_rms, color="black", linestyle="--", linewidth=1.5,
               label=f"positional encoding ({pe_rms:.3f})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    low, high = ax.get_ylim()
    ticks = [2.0 ** k for k in range(int(np.floor(np.log2(low))), int(np.ceil(np.log2(high))) + 1)]
    ax.set_yticks(ticks)
    ax.set_yticklabels([f"{t:g}" if t >= 1 else f"1/{1 / t:g}" for t in ticks])
    ax.set_ylim(low, high)
    ax.set_xticks(d_models)
    ax.set_xticklabels([str(int(d)) for d in d_models])
    ax.set_xlabel("d_model")
    ax.set_ylabel("RMS of one entry (log scale)")
    ax.set_title("What gets added to the positional encoding: the token's vector")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9, loc="upper left", framealpha=0.95)
    fig.tight_layout()
    return fig


def encoder_attention_grid(weights, tokens, title=None):
    """Self-attention weights of every layer (rows) and head (columns) for one sentence.

    ``weights`` is ``(num_layers, num_heads, L, L)`` with values in [0, 1]; ``tokens`` labels
    the L positions (queries on the y axis, keys on the x axis). Cells whose weight is exactly
    0 (a masked key) are left grey.
    """
    w = np.asarray(weights.detach().cpu() if hasattr(weights, "detach") else weights, float)
    num_layers, num_heads, L, _ = w.shape
    size = 0.32 * L + 0.9
    fig, axes = plt.subplots(num_layers, num_heads + 1, squeeze=False,
                             figsize=(size * num_heads + 1.2, size * num_layers + 0.6),
                             gridspec_kw={"width_ratios": [1] * num_heads + [0.06]})
    for row in range(num_layers):
        for col in range(num_heads):
            ax = axes[row, col]
            first = row == 0 and col == 0
            ax.set_facecolor("#bdbdbd")  # shows through where the weight is exactly 0
            sns.heatmap(w[row, col], ax=ax, mask=w[row, col] == 0, vmin=0.0, vmax=1.0,
                        cmap="rocket_r", square=True, cbar=first,
                        cbar_ax=axes[0, -1] if first else None,
                        cbar_kws={"label": "attention weight"},
                        xticklabels=tokens if row == num_layers - 1 else False,
                        yticklabels=tokens if col == 0 else False)
            ax.tick_params(axis="x", labelrotation=90, labelsize=8)
            ax.tick_params(axis="y", labelrotation=0, labelsize=8)
            if row == 0:
                ax.set_title(f"head {col}", fontsize=10)
            if col == 0:
                ax.set_ylabel(f"layer {row}\nquery", fontsize=9)
        if row > 0:
            axes[row, -1].axis("off")
    for col in range(num_heads):
        axes[-1, col].set_xlabel("key", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig

# ---- masks: boolean mask grids and the mask explorer (notebook 06)
EXPLORER_MAX_LEN = 16


def _as_bool_grid(mask) -> np.ndarray:
    if hasattr(mask, "detach"):
        mask = mask.detach().cpu().numpy()
    grid = np.asarray(mask)
    if grid.ndim != 2:
        raise ValueError(f"each mask must be 2-D (rows, columns), got shape {grid.shape}; "
                         "pick one sequence and head first, e.g. mask[0, 0]")
    return grid.astype(bool)


def _draw_mask(ax, grid, row_labels=None, column_labels=None, title=None):
    """One boolean grid in the colours of :func:`mask_heatmap`, each cell showing 1 or 0."""
    rows, columns = grid.shape
    cmap = ListedColormap([MASK_COLOURS["blocked"], MASK_COLOURS["may attend"]])
    ax.imshow(grid.astype(int), cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
    if rows * columns <= 400:
        size = 11 if max(rows, columns) <= 8 else 8
        for i in range(rows):
            for j in range(columns):
                ax.text(j, i, str(int(grid[i, j])), ha="center", va="center", fontsize=size,
                        color="white" if grid[i, j] else "dimgrey")
    ax.set_xticks(range(columns), column_labels if column_labels is not None else range(columns),
                  rotation=90 if columns > 8 else 0)
    ax.set_yticks(range(rows), row_labels if row_labels is not None else range(rows))
    ax.set_xticks(np.arange(columns + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(rows + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=1.5)
    ax.tick_params(which="minor", length=0)
    if title:
        ax.set_title(title, fontsize=10)


def plot_bool_masks(masks, titles=None, row_labels=None, column_labels=None):
    """Boolean masks side by side, each cell showing 1 (may attend) or 0 (blocked).

    ``masks`` is a list of 2-D masks (tensors or arrays, rows = queries, columns = keys); they
    may differ in shape, e.g. an ``(L, L)`` look-ahead mask next to a ``(1, L)`` padding row.
    """
    grids = [_as_bool_grid(m) for m in masks]
    titles = titles or [None] * len(grids)
    widest = max(g.shape[1] for g in grids)
    tallest = max(g.shape[0] for g in grids)
    fig, axes = plt.subplots(1, len(grids), squeeze=False,
                             figsize=(max(3.2 * len(grids), 0.45 * widest * len(grids) + 1.5),
                                      max(2.4, 0.45 * tallest + 1.6)),
                             gridspec_kw={"width_ratios": [g.shape[1] for g in grids]})
    for ax, grid, title in zip(axes[0], grids, titles, strict=True):
        rows = row_labels if row_labels is not None and len(row_labels) == grid.shape[0] else None
        _draw_mask(ax, grid, rows, column_labels if grid.shape[1] == widest else None, title)
        ax.set_xlabel("key (column)")
    axes[0][0].set_ylabel("query (row)")
    fig.tight_layout()
    return fig


def mask_explorer_data(seq_len, pad_len, causal, seed=0, d_k=8):
    """The numbers behind :func:`mask_explorer_figure` for one sequence of ``seq_len`` tokens
    whose last ``pad_len`` are padding (clamped to ``seq_len``), with or without the
    look-ahead mask.

    Returns a dict: "mask" ``(L, L)`` bool (True = may attend), "weights" ``(L, L)`` from
    ``helpers.attention.scaled_dot_product_attention`` on random queries and keys (the same
    ones for every ``pad_len`` and ``causal``: each position's vectors depend only on ``seed``),
    "pad_len" after clamping, "clamped" (bool) and "labels" (``t0``, ``t1``, ..., ``<pad>``).
    """
    import torch

    from .attention import scaled_dot_product_attention
    from .masks import causal_mask, padding_mask

    if not 1 <= seq_len <= EXPLORER_MAX_LEN:
        raise ValueError(f"seq_len must be between 1 and {EXPLORER_MAX_LEN}, got {seq_len}")
    if pad_len < 0:
        raise ValueError(f"pad_len cannot be negative, got {pad_len}")
    clamped = pad_len > seq_len
    pad_len = min(pad_len, seq_len)
    generator = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, EXPLORER_MAX_LEN, d_k, generator=generator)[:, :seq_len]
    tokens = torch.ones(1, seq_len, dtype=torch.long)  # token id 1 for real tokens, 0 for pads
    tokens[:, seq_len - pad_len:] = 0
    mask = padding_mask(tokens, pad_id=0)[0, 0]  # (1, L): hides padded keys from every query
    if causal:
        mask = causal_mask(seq_len) & mask  # (L, L) & (1, L) -> (L, L)
    mask = mask.expand(seq_len, seq_len)
    _, weights = scaled_dot_product_attention(q, k, k, mask)
    labels = [f"t{i}" for i in range(seq_len - pad_len)] + ["<pad>"] * pad_len
    return {"mask": mask.numpy().copy(), "weights": weights.numpy(), "pad_len": pad_len,
            "clamped": clamped, "labels": labels}


def mask_explorer_figure(seq_len=6, pad_len=2, causal=True, seed=0):
    """Left: the combined mask of one padded sequence. Right: the attention weights it allows.

    Blocked cells are grey in both panels; their weight is exactly 0. A query with no allowed
    key (every token padded) gets a row of zeros, never NaN. ``pad_len`` larger than
    ``seq_len`` is clamped (the title says so).
    """
    data = mask_explorer_data(seq_len, pad_len, causal, seed=seed)
    mask, weights, labels = data["mask"], data["weights"], data["labels"]
    padding = f"padding = {data['pad_len']}"
    if data["clamped"]:
        padding += f" (asked {pad_len}, clamped to L)"
    side = min(0.42 * seq_len + 2.2, 6.5)
    fig, (left, right) = plt.subplots(1, 2, figsize=(2 * side + 1.6, side + 0.4),
                                      layout="constrained")
    _draw_mask(left, mask, labels, labels,
               f"mask: L = {seq_len}, {padding}, causal {'on' if causal else 'off'}")
    cmap = plt.get_cmap("viridis").copy()
    cmap.set_bad(MASK_COLOURS["blocked"])
    image = right.imshow(np.ma.masked_array(weights, mask=~mask), cmap=cmap, vmin=0, vmax=1,
                         interpolation="nearest")
    if seq_len <= 10:
        for i, j in zip(*np.nonzero(mask), strict=True):
            right.text(j, i, f"{weights[i, j]:.2f}", ha="center", va="center",
                       fontsize=9 if seq_len <= 7 else 7,
                       color="black" if weights[i, j] > 0.6 else "white")
    if not mask.any():
        right.text((seq_len - 1) / 2, (seq_len - 1) / 2,
                   "every key is padding:\nall weights are 0 (not NaN)", ha="center",
                   va="center", fontsize=10, color="dimgrey")
    right.set_xticks(range(seq_len), labels, rotation=90 if seq_len > 8 else 0)
    right.set_yticks(range(seq_len), labels)
    right.set_title(f"attention weights (random q, k, seed {seed})", fontsize=10)
    fig.colorbar(image, ax=right, label="weight (grey: blocked, exactly 0)", shrink=0.8)
    for ax in (left, right):
        ax.set_xlabel("key (attended to)")
        ax.set_ylabel("query (attending)")
    return fig


# ---- Add & Norm: LayerNorm, residual paths, post-norm vs pre-norm (notebook 04)
# isort: split
from matplotlib import patches as mpatches  # noqa: E402
from matplotlib import ticker as mticker  # noqa: E402

NORM_COLOURS = {"post-norm": "#dd8452", "pre-norm": "#4c72b0",
                "without residual": "#c44e52", "with residual": "#55a868"}


def _addnorm_array(values):
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=float)


def layer_norm_rows_figure(before, after, token_labels=None):
    """Each token's features as dots on a number line, before and after LayerNorm.

    ``before`` and ``after`` are ``(tokens, features)``. A dashed tick marks each token's mean and
    a bar spans mean ± one (biased) standard deviation, so the centring and rescaling show.
    """
    before, after = _addnorm_array(before), _addnorm_array(after)
    n = before.shape[0]
    token_labels = token_labels or [f"token {i}" for i in range(n)]
    colours = sns.color_palette("deep", n)
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.55 * n + 1.8), sharey=True)
    jitter = np.random.default_rng(0).uniform(-0.12, 0.12, before.shape)
    for ax, data, title in zip(axes, (before, after), ("before: x", "after: LayerNorm(x)"),
                               strict=True):
        for i in range(n):
            mean, std = data[i].mean(), data[i].std()
            ax.plot([mean - std, mean + std], [i, i], color=colours[i], linewidth=6, alpha=0.25,
                    solid_capstyle="butt")
            ax.scatter(data[i], i + jitter[i], s=22, color=colours[i], zorder=3)
            ax.plot([mean, mean], [i - 0.3, i + 0.3], color="black", linestyle="--", linewidth=1)
        ax.axvline(0, color="grey", linewidth=0.8)
        ax.set_title(title)
        ax.set_xlabel("feature value")
    axes[0].set_yticks(range(n), token_labels)
    axes[0].set_ylim(n - 0.5, -0.5)
    axes[1].text(0.99, 0.01, "dashed: mean; shaded: mean ± std", transform=axes[1].transAxes,
                 ha="right", va="bottom", fontsize=8, color="dimgrey")
    fig.tight_layout()
    return fig


def _per_layer_lines(ax, series, ylabel, log=True):
    for label, values in series.items():
        values = _addnorm_array(values)
        ax.plot(np.arange(1, len(values) + 1), values, "o-", markersize=3.5, label=label,
                color=NORM_COLOURS.get(label))
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("layer (1 = nearest the input)")
    ax.set_ylabel(ylabel)
    ax.xaxis.set_major_locator(mticker.MaxNLocator(integer=True, nbins=12))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9)


def gradient_norms_figure(norms, title=None):
    """Gradient norm reaching each layer's weights, one line per entry of ``norms`` (log scale).

    ``norms`` maps a label (e.g. "with residual") to a sequence with one value per layer.
    """
    fig, ax = plt.subplots(figsize=(7.5, 4))
    _per_layer_lines(ax, norms, "‖∂loss/∂W‖ (log scale)")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def post_vs_pre_norm_figure(grad_norms, stream_rms):
    """Left: gradient norm per layer. Right: size (RMS) of x after each layer (both from 0).

    Both arguments map "post-norm" / "pre-norm" to one value per layer.
    """
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    _per_layer_lines(left, grad_norms, "‖∂loss/∂W₁‖", log=False)
    left.set_ylim(bottom=0)
    left.set_title("gradient reaching each layer at initialisation")
    _per_layer_lines(right, stream_rms, "RMS of x after the layer", log=False)
    right.set_ylim(bottom=0)
    right.set_title("size of the residual stream x")
    fig.tight_layout()
    return fig


def _addnorm_box(ax, x, y, text, colour, width=1.5, height=0.5):
    ax.add_patch(mpatches.FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                boxstyle="round,pad=0.05", facecolor=colour, edgecolor="black"))
    ax.text(x, y, text, ha="center", va="center", fontsize=10)


def _addnorm_arrow(ax, start, end, **kwargs):
    kwargs.setdefault("color", "black")
    ax.add_patch(mpatches.FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12,
                                 shrinkA=0, shrinkB=0, **kwargs))


def norm_placement_figure():
    """The two places for LayerNorm in a sub-layer block, drawn bottom (input) to top (output).

    Left, post-norm (the paper): ``LayerNorm(x + Sublayer(x))``. Right, pre-norm:
    ``x + Sublayer(LayerNorm(x))``. The curved arrow is the residual (identity) path.
    """
    norm_colour, sub_colour = "#fde3a7", "#cfe2f3"
    fig, axes = plt.subplots(1, 2, figsize=(9, 5.2))
    for ax, pre in zip(axes, (False, True), strict=True):
        ax.set(xlim=(-1.6, 1.6), ylim=(-0.4, 5.4), xticks=[], yticks=[])
        for side in ax.spines.values():
            side.set_visible(False)
        ax.text(0, -0.25, "x (input)", ha="center", va="center", fontsize=10)
        if pre:
            steps = [(1.4, "LayerNorm", norm_colour), (2.6, "Sublayer", sub_colour)]
            plus, out_y = 3.8, 5.0
        else:
            steps = [(1.4, "Sublayer", sub_colour)]
            plus, out_y = 2.6, 5.0
        previous = 0.0
        for y, text, colour in steps:
            _addnorm_arrow(ax, (0, previous), (0, y - 0.3))
            _addnorm_box(ax, 0, y, text, colour)
            previous = y + 0.3
        _addnorm_arrow(ax, (0, previous), (0, plus - 0.22))
        ax.add_patch(mpatches.Circle((0, plus), 0.22, facecolor="white", edgecolor="black"))
        ax.text(0, plus, "+", ha="center", va="center", fontsize=14)
        # the residual path: branch off below the first box, go round it, join at "+"
        ax.plot([0, -1.15, -1.15], [0.5, 0.5, plus], color="dimgrey", linestyle="--")
        _addnorm_arrow(ax, (-1.15, plus), (-0.22, plus), color="dimgrey", linestyle="--")
        ax.text(-1.27, (plus + 0.5) / 2, "residual path (identity)", ha="center", va="center",
                rotation=90, fontsize=9, color="dimgrey")
        if pre:
            _addnorm_arrow(ax, (0, plus + 0.22), (0, out_y - 0.1))
        else:
            _addnorm_arrow(ax, (0, plus + 0.22), (0, 3.8 - 0.3))
            _addnorm_box(ax, 0, 3.8, "LayerNorm", norm_colour)
            _addnorm_arrow(ax, (0, 4.1), (0, out_y - 0.1))
        ax.text(0, out_y + 0.1, "output", ha="center", va="center", fontsize=10)
        ax.set_title("pre-norm: x + Sublayer(LayerNorm(x))" if pre else
                     "post-norm (the paper): LayerNorm(x + Sublayer(x))", fontsize=10)
    fig.tight_layout()
    return fig


def training_curves_figure(curves, title=None):
    """Training loss per step (log scale), one line per entry of ``curves`` (label -> losses)."""
    fig, ax = plt.subplots(figsize=(7.5, 4))
    styles = ["-", "-", "--", ":"]
    for i, (label, losses) in enumerate(curves.items()):
        losses, style = _addnorm_array(losses), styles[i % len(styles)]
        colour = next((c for key, c in NORM_COLOURS.items() if label.startswith(key)), None)
        ax.plot(np.arange(1, len(losses) + 1), losses, style, label=label, color=colour)
    ax.set_yscale("log")
    ax.set(xlabel="training step", ylabel="loss (mean squared error, log scale)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


# ---- decoder: what one target position may see, and where it looks (notebook 07)
STEP_COLOURS = ("#e3e3e3", "#b9d3ec", "#2b6cb0")  # blocked, may attend (other rows), row t
STEP_FRAME = "#e6550d"  # orange: the frame around row t, visible on blue and on grey


def _decoder_step_grid(t, self_mask):
    """The self-attention mask as ints: 0 blocked, 1 allowed in another row, 2 allowed in row t."""
    grid = self_mask.astype(int)
    grid[t][self_mask[t]] = 2
    return grid


def decoder_step_figure(t, self_mask, cross_weights, tgt_labels, src_labels):
    """What decoder position ``t`` works with, in two panels.

    Left: the self-attention mask ``(T, T)`` (bool, True = may attend) with row ``t`` in dark blue,
    the target positions that position t may see (0..t for a look-ahead mask). Right: the
    cross-attention weights ``(T, S)`` over the source; row ``t`` is framed and written out, the
    other rows are faded.
    """
    mask = _to_2d(self_mask, "self_mask").astype(bool)
    weights = _to_2d(cross_weights, "cross_weights").astype(float)
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
    left.imshow(_decoder_step_grid(t, mask), cmap=ListedColormap(STEP_COLOURS), vmin=0, vmax=2,
                interpolation="nearest")
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
        ax.set_xticks(np.arange(n + 1) - 0.5, minor=True)
        ax.set_yticks(np.arange(T + 1) - 0.5, minor=True)
        ax.grid(which="minor", color="white", linewidth=1.5)
        ax.tick_params(which="minor", length=0)
        ax.add_patch(Rectangle((-0.5, t - 0.5), n, 1, fill=False, edgecolor=STEP_FRAME, lw=3,
                               zorder=3, clip_on=False))
        ax.set_xlabel(xlabel)
    left.set_ylabel("decoder position (query)")  # the same rows on the right
    handles = [Patch(facecolor=colour, edgecolor="grey", label=label) for colour, label in
               zip(STEP_COLOURS, ("blocked", "may attend (other rows)", f"position {t} may see"),
                   strict=True)][::-1]
    left.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncols=3,
                fontsize=9, frameon=False, handlelength=1.2, columnspacing=1.0)
    fig.suptitle(f"decoder step t = {t}: the input token at position {t} is "
                 f"'{tgt_labels[t]}'", fontsize=11)
    return fig


def decoder_loss_curves_figure(curves, title=None):
    """Training loss per step on a log scale, one line per entry of ``curves`` (label -> losses)."""
    fig, ax = plt.subplots(figsize=(7, 3.6), layout="constrained")
    for label, losses in curves.items():
        losses = np.asarray(losses, dtype=float)
        ax.plot(np.arange(1, len(losses) + 1), losses, label=label, lw=1.5)
    ax.set_yscale("log")
    ax.set(xlabel="training step", ylabel="cross-entropy loss (log scale)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9)
    if title:
        ax.set_title(title, fontsize=11)
    return fig


# ---- the whole model: next-token probabilities, where the parameters live (notebook 08)
def next_token_probabilities_figure(probs, row_labels, vocab_labels, targets=None, title=None):
    """Next-token probabilities ``(T, V)`` as a heatmap: row t is the distribution after position t.

    The colour scale runs from 0 to the largest probability (an untrained model spreads its bets,
    so every cell would look pale on a [0, 1] scale); each cell shows its value, and a red line on
    the colour bar marks the uniform guess 1/V. ``targets`` (one vocabulary index per row, or None)
    draws a black frame around the true next token of each row.
    """
    if hasattr(probs, "detach"):
        probs = probs.detach().cpu().numpy()
    p = np.asarray(probs, dtype=float)
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
    ax.set_xlabel("next token (vocabulary)")
    ax.set_ylabel("decoder position: input token")
    for row, column in enumerate([] if targets is None else targets):
        ax.add_patch(Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="black",
                               lw=2.5))
    bar = fig.colorbar(image, ax=ax, label="probability (red line: 1/V)", shrink=0.9)
    bar.ax.axhline(1.0 / V, color="#d62728", lw=2.5)
    if title:
        ax.set_title(title, fontsize=11)
    return fig


def parameter_breakdown_figure(breakdowns, reference=None, reference_label=None):
    """Stacked horizontal bars, one per model: how many parameters each component holds.

    ``breakdowns`` maps a model's label to ``{component: count}``; a component keeps its colour
    in every bar. Counts are drawn in millions, with each bar's total at its end. ``reference``
    (a count) adds a dashed vertical line, for example the paper's 65M.
    """
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
        ax.axvline(reference / 1e6, color="#333333", ls="--", lw=1.5,
                   label=reference_label or f"reference: {reference / 1e6:.0f}M")
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()  # the first model on top
    ax.set_xlim(0, top * 1.12)
    ax.set_xlabel("parameters (millions)")
    ax.grid(axis="x", alpha=0.3)
    fig.legend(loc="outside lower center", ncol=3, frameon=False, fontsize=9)
    return fig


# ---- training: corpus lengths, batch grids, label smoothing, the schedule, the loss (notebook 09)
TOKEN_COLOURS = {"<pad>": "#e3e3e3", "<bos>": "#c4e6c1", "<eos>": "#f9c89b", "<unk>": "#f4a6a6"}


def sentence_length_figure(lengths, title=None):
    """Histograms of sentence lengths in words, one per entry of ``lengths`` (label -> list)."""
    fig, ax = plt.subplots(figsize=(7, 3.4), layout="constrained")
    values = {label: np.asarray(v, dtype=int) for label, v in lengths.items()}
    if not values or any(v.size == 0 for v in values.values()):
        raise ValueError("expected at least one non-empty list of lengths")
    low = min(v.min() for v in values.values())
    high = max(v.max() for v in values.values())
    bins = np.arange(low - 0.5, high + 1.5)
    ax.hist(list(values.values()), bins=bins, edgecolor="white",
            label=[f"{label} (mean {v.mean():.1f})" for label, v in values.items()])
    ax.set(xlabel="sentence length (words)", ylabel="sentences")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=9)
    if title:
        ax.set_title(title, fontsize=11)
    return fig


def batch_tokens_figure(grids, titles=None):
    """Token grids side by side (rows = sentences, columns = positions), one word per cell.

    ``grids`` is a list of 2-D lists of strings, e.g. a batch's ``src``, ``tgt_in`` and
    ``tgt_out`` decoded word by word; special tokens get the colours of ``TOKEN_COLOURS``.
    """
    grids = [[list(row) for row in grid] for grid in grids]
    if not grids or any(not grid or len({len(r) for r in grid}) != 1 for grid in grids):
        raise ValueError("expected a list of rectangular, non-empty 2-D lists of tokens")
    titles = titles or [None] * len(grids)
    widths = [len(grid[0]) for grid in grids]
    rows = max(len(grid) for grid in grids)
    fig, axes = plt.subplots(len(grids), 1, squeeze=False,
                             figsize=(max(1.05 * max(widths), 6), (0.42 * rows + 0.8) * len(grids)),
                             layout="constrained")
    for ax, grid, title in zip(axes[:, 0], grids, titles, strict=True):
        height, width = len(grid), len(grid[0])
        for i, row in enumerate(grid):
            for j, token in enumerate(row):
                colour = TOKEN_COLOURS.get(token, "#ffffff")
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=colour,
                                       edgecolor="#999999", lw=0.8))
                ax.text(j, i, token, ha="center", va="center", fontsize=8,
                        color="#777777" if token == "<pad>" else "black")
        ax.set_xlim(-0.5, max(widths) - 0.5)
        ax.set_ylim(height - 0.5, -0.5)
        ax.set_xticks(range(width))
        ax.set_yticks(range(height))
        ax.set_xlabel("position", fontsize=9)
        ax.set_ylabel("sentence", fontsize=9)
        ax.tick_params(labelsize=8, length=0)
        for side in ax.spines.values():
            side.set_visible(False)
        if title:
            ax.set_title(title, fontsize=10, loc="left")
    return fig


def label_smoothing_figure(distributions, vocab_labels, label_index, title=None):
    """Target distributions over a vocabulary as grouped bars, one group per token.

    ``distributions``: label -> a vector of V probabilities (e.g. one-hot and smoothed);
    ``label_index`` marks the right token, whose tick is drawn in bold.
    """
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
    ax.set_ylim(0, 1.12)
    ax.set(xlabel="vocabulary (bold: the right next token)", ylabel="target probability")
    ax.legend(fontsize=9, loc="upper left")
    if title:
        ax.set_title(title, fontsize=11)
    return fig


def per_position_loss_figure(losses, labels, ignored, title=None):
    """One bar per target position: its loss, with ignored (padding) positions marked at 0."""
    losses = np.asarray(losses, dtype=float)
    ignored = np.asarray(ignored, dtype=bool)
    if not (losses.shape == ignored.shape == (len(labels),)):
        raise ValueError("losses, labels and ignored must have one entry per position")
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(labels) + 1.5), 3.2), layout="constrained")
    colours = np.where(ignored, TOKEN_COLOURS["<pad>"], "#2b6cb0")
    ax.bar(range(len(labels)), np.where(ignored, 0.0, losses), color=colours, edgecolor="#999999")
    for j in np.flatnonzero(ignored):
        ax.text(j, 0.02 * max(losses.max(), 1e-9), "ignored", rotation=90, ha="center",
                va="bottom", fontsize=8, color="#777777")
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set(xlabel="label (the next token) at each position", ylabel="loss")
    if title:
        ax.set_title(title, fontsize=11)
    return fig


def lr_schedule_figure(curves, warmup, title=None):
    """Learning rate against step, one line per entry of ``curves`` (label -> lrs from step 1).

    A dotted vertical line marks ``step == warmup``; each curve's peak gets a dot and its value.
    """
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
    if title:
        ax.set_title(title, fontsize=11)
    return fig


def training_loss_figure(losses, window=25, levels=None, title=None):
    """Loss per step (thin) with its moving average over ``window`` steps (thick), log scale.

    ``levels``: label -> value drawn as dashed horizontal lines (e.g. ln V at the start, the
    smallest loss label smoothing allows).
    """
    losses = np.asarray(losses, dtype=float)
    if losses.ndim != 1 or losses.size == 0:
        raise ValueError("expected a non-empty 1-D sequence of losses")
    steps = np.arange(1, losses.size + 1)
    fig, ax = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
    ax.plot(steps, losses, lw=0.8, alpha=0.45, color="#2b6cb0", label="loss of each step")
    window = max(1, min(window, losses.size))
    smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
    ax.plot(steps[window - 1:], smooth, lw=2, color="#2b6cb0",
            label=f"moving average ({window} steps)")
    for (label, value), colour in zip((levels or {}).items(), ("#c05621", "#2f855a", "#6b46c1"),
                                      strict=False):
        ax.axhline(value, ls="--", lw=1.2, color=colour, label=f"{label} = {value:.2f}")
    ax.set_yscale("log")
    low, high = ax.get_ylim()
    ax.set_yticks([t for t in (0.25, 0.5, 1, 2, 3, 4, 6, 8, 12) if low <= t <= high])
    ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(mticker.NullFormatter())
    ax.set(xlabel="training step", ylabel="training loss (log scale)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=9)
    if title:
        ax.set_title(title, fontsize=11)
    return fig

# ---- inspecting a trained model's attention: maps, the explorer, alignment (notebook 11)
ATTENTION_KINDS = {"encoder": "encoder self-attention", "decoder": "decoder self-attention",
                   "cross": "cross-attention"}


def _as_weights_array(weights, ndim: int, name: str) -> np.ndarray:
    if hasattr(weights, "detach"):
        weights = weights.detach().cpu()
    array = np.asarray(weights, dtype=float)
    if array.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} axes, got shape {array.shape}")
    return array


def _attention_map_labels(maps: dict, kind: str):
    """(key labels, query labels) of one kind of map in a dict of notebook 11.

    Decoder queries read as "input -> predicted word": the row fed "voiture" predicts "rouge".
    """
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"kind must be one of {list(ATTENTION_KINDS)}, got {kind!r}")
    if kind == "encoder":
        return list(maps["src_tokens"]), list(maps["src_tokens"])
    queries = [f"{a} → {b}" for a, b in zip(maps["tgt_in"], maps["tgt_out"], strict=True)]
    keys = maps["tgt_in"] if kind == "decoder" else maps["src_tokens"]
    return list(keys), queries


def _draw_map(ax, weights, x_labels, y_labels, annotate, blocked=None):
    """One attention map in [0, 1]; cells where ``blocked`` is True (masked keys) are grey."""
    ax.set_facecolor("#d9d9d9")
    hidden = np.zeros(weights.shape, bool) if blocked is None else np.asarray(blocked, bool)
    image = ax.imshow(np.ma.masked_array(weights, hidden), cmap=WEIGHTS_CMAP, vmin=0.0, vmax=1.0,
                      interpolation="nearest", aspect="equal")
    _set_ticks(ax, "x", weights.shape[1], x_labels)
    _set_ticks(ax, "y", weights.shape[0], y_labels)
    if annotate:
        for (i, j), w in np.ndenumerate(weights):
            if w >= 0.005:
                ax.text(j, i, f"{w:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if w > 0.6 else "black")
    return image


def attention_grid_figure(weights, x_labels, y_labels, title=None, blocked=None):
    """Every layer (rows) and head (columns) of one kind of attention for one sentence.

    ``weights`` is ``(num_layers, num_heads, Lq, Lk)``; keys on the x axis, queries on the
    y axis; one shared colour scale [0, 1]; cells where ``blocked`` ``(Lq, Lk)`` is True (a
    mask's hidden keys, such as the decoder's future) are grey.
    """
    w = _as_weights_array(weights, 4, "weights")
    num_layers, num_heads, Lq, Lk = w.shape
    cell = min(max(0.26 * max(Lq, Lk) + 0.6, 2.0), 3.6)
    fig, axes = plt.subplots(num_layers, num_heads, squeeze=False, layout="constrained",
                             figsize=(cell * num_heads + 2.6, cell * num_layers + 0.9))
    for (layer, head), ax in np.ndenumerate(axes):
        image = _draw_map(ax, w[layer, head], x_labels, y_labels, False, blocked)
        ax.set_title(f"layer {layer}, head {head}", fontsize=9)
        if head:
            ax.set_yticklabels([])
        if layer < num_layers - 1:
            ax.set_xticklabels([])
    for layer in range(num_layers):
        axes[layer, 0].set_ylabel("query")
    for head in range(num_heads):
        axes[-1, head].set_xlabel("key")
    fig.colorbar(image, ax=axes, label="attention weight", shrink=0.8)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def attention_explorer_figure(maps, kind="cross", layer=0, head=0):
    """One map of one sentence from the dict of notebook 11: ``kind`` ("encoder", "decoder" or
    "cross"), ``layer``, and ``head`` (an index, or "mean" for the average over the heads).
    The decoder's future (above the diagonal, hidden by the causal mask) is grey.

    ``maps`` holds ``src_tokens``, ``tgt_in``, ``tgt_out`` (token labels), ``french`` and one
    ``(num_layers, num_heads, Lq, Lk)`` array per kind.
    """
    x_labels, y_labels = _attention_map_labels(maps, kind)
    w = _as_weights_array(maps[kind], 4, f"maps[{kind!r}]")
    num_layers, num_heads = w.shape[:2]
    if not 0 <= layer < num_layers:
        raise ValueError(f"layer must be in 0..{num_layers - 1}, got {layer}")
    if head != "mean" and not (isinstance(head, int) and 0 <= head < num_heads):
        raise ValueError(f"head must be in 0..{num_heads - 1} or 'mean', got {head!r}")
    weights = w[layer].mean(axis=0) if head == "mean" else w[layer, head]
    Lq, Lk = weights.shape
    fig, ax = plt.subplots(figsize=(0.55 * Lk + 3.6, 0.45 * Lq + 1.8), layout="constrained")
    future = np.triu(np.ones((Lq, Lk), bool), k=1) if kind == "decoder" else None
    image = _draw_map(ax, weights, x_labels, y_labels, True, future)
    ax.set_xlabel("key (English)" if kind != "decoder" else "key (French, shifted right)")
    ax.set_ylabel("query" if kind == "encoder" else "query: input → predicted")
    which = "mean of the heads" if head == "mean" else f"head {head}"
    ax.set_title(f"{ATTENTION_KINDS[kind]}, layer {layer}, {which}\n"
                 f"{' '.join(maps['src_tokens'])}\n→ {maps['french']}", fontsize=10)
    fig.colorbar(image, ax=ax, label="attention weight", shrink=0.9)
    return fig


def alignment_accuracy_figure(accuracy, titles, chance=None):
    """Per layer (rows) and head (columns) accuracies in [0, 1], one panel per entry of
    ``accuracy`` (``(panels, num_layers, num_heads)``), printed as percentages; ``chance``
    (a number in [0, 1]) is quoted in the title of the figure."""
    acc = _as_weights_array(accuracy, 3, "accuracy")
    panels, num_layers, num_heads = acc.shape
    if len(titles) != panels:
        raise ValueError(f"{len(titles)} titles given for {panels} panels")
    fig, axes = plt.subplots(1, panels, squeeze=False, layout="constrained",
                             figsize=(2.9 * panels + 1.3, 0.75 * num_layers + 1.6))
    for p, ax in enumerate(axes[0]):
        image = ax.imshow(acc[p], cmap="Greens", vmin=0.0, vmax=1.0, aspect="equal")
        for (i, j), a in np.ndenumerate(acc[p]):
            ax.text(j, i, f"{100 * a:.0f}%", ha="center", va="center", fontsize=9,
                    color="white" if a > 0.6 else "black")
        ax.set_xticks(range(num_heads), [f"head {h}" for h in range(num_heads)], fontsize=8)
        ax.set_yticks(range(num_layers), [f"layer {i}" for i in range(num_layers)], fontsize=8)
        ax.set_title(titles[p], fontsize=10)
    fig.colorbar(image, ax=axes, label="fraction of sentences", shrink=0.9)
    if chance is not None:
        fig.suptitle(f"argmax of cross-attention on the right English word "
                     f"(chance about {100 * chance:.0f}%)", fontsize=10)
    return fig


# ---- decoding: the beam-search tree (notebook 10)
_BEAM_STYLE = {  # status -> (face colour, edge colour, alpha)
    "kept": ("#cfe3f7", "#3b75af", 1.0),
    "finished": ("#c9ebc4", "#2e8b3a", 1.0),
    "pruned": ("#f2f2f2", "#9a9a9a", 0.35),
}
_BEAM_BEST = "#e07b00"


def _beam_tree_layout(steps):
    """y of every node, column by column: children under their parent's order, best first."""
    columns = [[0.0]]  # the root
    for nodes in steps:
        previous = columns[-1]
        order = sorted(range(len(nodes)),
                       key=lambda i: (-previous[nodes[i]["parent"]], -nodes[i]["score"]))
        ys = [0.0] * len(nodes)
        for rank, i in enumerate(order):
            ys[i] = (len(nodes) - 1) / 2 - rank
        columns.append(ys)
    return columns


def beam_tree_figure(tree, title=None):
    """Draw a beam search as a tree, one column per step.

    ``tree = {"root": "<bos>", "steps": [[node, ...], ...]}``; a node is a dict with ``parent``
    (index into the previous step's list; 0 = the root for the first step), ``token`` (str),
    ``score`` (cumulative log-probability, printed on the edge into the node), ``status``
    ("kept", "pruned" or "finished") and optionally ``best`` (True on the best hypothesis' path,
    drawn thick in orange). Pruned branches are faded; finished hypotheses are green squares.
    """
    steps = tree["steps"]
    columns = _beam_tree_layout(steps)
    tallest = max(len(c) for c in columns)
    fig, ax = plt.subplots(figsize=(min(16.0, 1.7 * (len(steps) + 1) + 0.5),
                                    max(3.0, 0.42 * tallest + 1.4)))
    box = dict(boxstyle="round,pad=0.25", facecolor=_BEAM_STYLE["kept"][0],
               edgecolor=_BEAM_BEST, linewidth=2)
    ax.text(0, 0, tree.get("root", "<bos>"), ha="center", va="center", fontsize=9, bbox=box,
            gid="node")
    for t, nodes in enumerate(steps, start=1):
        for node, y in zip(nodes, columns[t], strict=True):
            face, edge, alpha = _BEAM_STYLE[node["status"]]
            best = bool(node.get("best"))
            y0 = columns[t - 1][node["parent"]]
            ax.plot([t - 1 + 0.3, t - 0.3], [y0, y], color=_BEAM_BEST if best else edge,
                    alpha=alpha, linewidth=3.0 if best else 1.2, zorder=1, gid="edge")
            ax.text(t - 0.34, y + 0.18, f"{node['score']:.2f}", ha="right", va="bottom",
                    fontsize=7, alpha=alpha, color="black", zorder=3, gid="edge-label")
            shape = "square,pad=0.3" if node["status"] == "finished" else "round,pad=0.25"
            ax.text(t, y, node["token"], ha="center", va="center", fontsize=9, alpha=alpha,
                    fontweight="bold" if best else "normal", zorder=2, gid="node",
                    bbox=dict(boxstyle=shape, facecolor=face, alpha=alpha,
                              edgecolor=_BEAM_BEST if best else edge,
                              linewidth=2 if best else 1))
    half = (tallest - 1) / 2
    ax.set_xlim(-0.6, len(steps) + 0.6)
    ax.set_ylim(-half - 0.8, half + 0.8)
    ax.set_xticks(range(len(steps) + 1))
    ax.set_xticklabels(["start"] + [f"step {t}" for t in range(1, len(steps) + 1)])
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    handles = [plt.Line2D([], [], color=_BEAM_STYLE["kept"][1], label="kept in the beam"),
               plt.Line2D([], [], color=_BEAM_STYLE["pruned"][1], alpha=0.35, label="pruned"),
               plt.Line2D([], [], color=_BEAM_STYLE["finished"][1], marker="s", linestyle="",
                          markerfacecolor=_BEAM_STYLE["finished"][0], label="finished (EOS)"),
               plt.Line2D([], [], color=_BEAM_BEST, linewidth=3, label="best hypothesis")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=4,
              fontsize=8, frameon=False)
    ax.set_title(title or "beam search (numbers: cumulative log-probability)", fontsize=10)
    fig.tight_layout()
    return fig
