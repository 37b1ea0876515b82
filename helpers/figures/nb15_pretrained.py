"""What a production translator changes in the paper's model (notebook 15): the two layouts of
the sinusoidal table, and the feed-forward activations (ReLU against swish)."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from .style import CONTRAST, SIGNED_CMAP, as_array, integer_axis

SIN_COS = ("tab:orange", "tab:purple")  # the colours of notebook 02: sine columns, cosine columns


def positional_layouts_figure(interleaved, halves):
    """Two ``(positions, d_model)`` tables on one colour scale, the paper's (``interleaved``) and
    Marian's (``halves``), each above a strip showing its sine and cosine columns."""
    tables = [as_array(interleaved, "interleaved", ndim=2), as_array(halves, "halves", ndim=2)]
    if tables[0].shape != tables[1].shape:
        raise ValueError(f"the two tables must have the same shape, got {tables[0].shape} and "
                         f"{tables[1].shape}")
    n, d = tables[0].shape
    sine_columns = [np.arange(d) % 2 == 0, np.arange(d) < d // 2]
    fig, axes = plt.subplots(2, 2, figsize=(11, 4.8), sharex=True, layout="constrained",
                             gridspec_kw={"height_ratios": [8, 1]})
    titles = ("the paper: sin, cos, sin, cos, ... (interleaved)",
              "Marian (opus-mt): all sines, then all cosines")
    for column, (table, sines, title) in enumerate(zip(tables, sine_columns, titles, strict=True)):
        image = axes[0, column].imshow(table, cmap=SIGNED_CMAP, vmin=-1, vmax=1, aspect="auto",
                                       interpolation="nearest")
        axes[0, column].set_title(title, fontsize=10)
        axes[0, column].set_ylabel("position" if column == 0 else "")
        axes[1, column].imshow(np.where(sines, 0, 1)[None, :], cmap=ListedColormap(SIN_COS),
                               vmin=0, vmax=1, aspect="auto", interpolation="nearest")
        axes[1, column].set_yticks([])
        axes[1, column].set_xlabel("dimension (column of the table)")
        integer_axis(axes[1, column].xaxis)
    handles = [Patch(color=colour, label=label)
               for colour, label in zip(SIN_COS, ("sine column", "cosine column"), strict=True)]
    fig.colorbar(image, ax=axes[0, :], label="value", shrink=0.9)
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=9, frameon=False)
    return fig


def activation_figure(x, curves):
    """The feed-forward activations: ``curves`` maps a label to its values on ``x``."""
    x = as_array(x, "x", ndim=1)
    fig, ax = plt.subplots(figsize=(6.5, 3.8), layout="constrained")
    for (label, values), colour in zip(curves.items(), CONTRAST, strict=False):
        ax.plot(x, as_array(values, label, ndim=1), color=colour, lw=2, label=label)
    ax.axhline(0, color="0.8", lw=0.8, zorder=0)
    ax.axvline(0, color="0.8", lw=0.8, zorder=0)
    ax.set(xlabel="x (a hidden unit before the activation)", ylabel="activation(x)",
           title="the feed-forward network's non-linearity")
    ax.legend(fontsize=9)
    ax.grid(True, alpha=0.3)
    return fig
