"""The sinusoidal positional encoding: the table, its wavelengths, similarities and rotations
(notebook 02)."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from .style import SIGNED_CMAP, as_array, integer_axis


def plot_positional_encoding(pe, position=None):
    """Heatmap of a ``(positions, d_model)`` table. With ``position``, that row is outlined and
    drawn below as a vector (sine and cosine columns in two colours) under the same columns."""
    table = as_array(pe, "pe")
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
    image = ax_map.imshow(table, cmap=SIGNED_CMAP, vmin=-1, vmax=1, aspect="auto",
                          interpolation="nearest", extent=(-0.5, d - 0.5, n - 0.5, -0.5))
    fig.colorbar(image, ax=axes, label="PE value", shrink=0.9)
    ax_map.set_ylabel("position p")
    title = f"sinusoidal positional encoding: {n} positions x d_model = {d}"
    ax_map.set_title(title if position is None else f"{title} (outlined: position {position})")
    axes[-1].set_xlabel("dimension (column of the table)")
    integer_axis(axes[-1].xaxis)
    if position is None:
        return fig
    ax_map.add_patch(Rectangle((-0.5, position - 0.5), d, 1, fill=False, edgecolor="black",
                               linewidth=2.5))
    for x, marker in [(-0.5, ">"), (d - 0.5, "<")]:  # arrowheads outside, for long tables
        ax_map.plot([x], [position], marker=marker, color="black", markersize=9, clip_on=False)
    row, columns = table[position], np.arange(d)
    ax_vec.plot(columns, row, color="0.7", linewidth=1, zorder=1)
    ax_vec.scatter(columns[0::2], row[0::2], s=18, color="tab:orange", zorder=2,
                   label="even columns: sin")
    ax_vec.scatter(columns[1::2], row[1::2], s=18, color="tab:purple", zorder=2,
                   label="odd columns: cos")
    ax_vec.axhline(0, color="0.85", linewidth=0.8, zorder=0)
    ax_vec.set(xlim=(-0.5, d - 0.5), ylim=(-1.2, 1.2), ylabel=f"PE[{position}]")
    ax_vec.legend(loc="lower right", fontsize=8, ncol=2, framealpha=0.9)
    return fig


def plot_pe_wavelengths(wavelengths, base):
    """Wavelength (in positions) of each sin/cos column pair, on a log scale, with its bounds."""
    lam = as_array(wavelengths, "wavelengths").ravel()
    pairs = np.arange(len(lam))
    fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
    ax.plot(pairs, lam, "o-", color="tab:blue", markersize=4, label="wavelength of pair i")
    ax.axhline(2 * np.pi, color="tab:green", linestyle="--",
               label=f"2$\\pi$ = {2 * np.pi:.2f} (pair 0, columns 0 and 1)")
    ax.axhline(2 * np.pi * base, color="tab:red", linestyle="--",
               label=f"2$\\pi$ x base = {2 * np.pi * base:,.0f} (never quite reached)")
    ax.set(yscale="log", xlabel="pair index i (columns 2i and 2i+1)",
           ylabel="wavelength (positions)",
           title=f"Each pair turns at its own speed (base = {base:g}, d_model = {2 * len(lam)})")
    ax.legend(loc="upper left", fontsize=9)
    return fig


def plot_pe_similarity(similarity, anchors, max_offset):
    """Left: the ``(n, n)`` dot products PE(p) . PE(q). Right: the rows of the ``anchors`` p
    against the offset k = q - p in ``-max_offset..max_offset``, on top of each other."""
    sim = as_array(similarity, "similarity")
    n = sim.shape[0]
    if sim.ndim != 2 or sim.shape[1] != n:
        raise ValueError(f"similarity must be a square (n, n) matrix, got shape {sim.shape}")
    for p in anchors:
        if p - max_offset < 0 or p + max_offset >= n:
            raise ValueError(f"anchor {p} +- {max_offset} does not fit in 0..{n - 1}")
    fig, (ax_map, ax_line) = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained",
                                          gridspec_kw={"width_ratios": [1, 1.3]})
    vmax = np.abs(sim).max()
    image = ax_map.imshow(sim, cmap=SIGNED_CMAP, vmin=-vmax, vmax=vmax, interpolation="nearest")
    fig.colorbar(image, ax=ax_map, label="PE(p) . PE(q)", shrink=0.85)
    ax_map.set(xlabel="position q", ylabel="position p",
               title="dot product of every pair of positions")
    offsets = np.arange(-max_offset, max_offset + 1)
    styles = ["-", "--", ":", "-."]
    for j, p in enumerate(anchors):
        ax_map.plot([p - max_offset, p + max_offset], [p, p], color="black", linewidth=1)
        ax_line.plot(offsets, sim[p, p + offsets], linestyle=styles[j % len(styles)],
                     linewidth=3.5 - 0.8 * (j % 3), label=f"p = {p}")
    ax_line.axvline(0, color="0.8", linewidth=0.8, zorder=0)
    ax_line.set(xlabel="offset k = q - p", ylabel="PE(p) . PE(p + k)",
                title="the same curve for every p, symmetric in k")
    ax_line.legend(title="row (black lines, left)", fontsize=9)
    return fig


def plot_pe_rotation(pe, k, starts, pairs=(0, 1)):
    """Each column pair (2i, 2i+1) as points on the unit circle, with arrows from ``PE[p]`` to
    ``PE[p + k]`` for each p of ``starts``: k positions turn every arrow of a pair alike."""
    table = as_array(pe, "pe")
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
        ax.set(aspect="equal", xlim=(-1.35, 1.35), ylim=(-1.35, 1.35),
               xlabel=f"PE[p, {2 * i}] (sin)", ylabel=f"PE[p, {2 * i + 1}] (cos)",
               title=f"pair i = {i}: arrows from p to p + {k}")
    fig.colorbar(points, ax=axes[0].tolist(), label="position p", shrink=0.8)
    return fig
