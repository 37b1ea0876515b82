"""The encoder's input: why token embeddings are scaled by sqrt(d_model) (notebook 05)."""

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns


def embedding_scale_figure(d_models, series, pe_rms):
    """The RMS of one embedding entry against d_model, one line per entry of ``series`` (label
    -> one value per d_model), and the positional encoding's ``pe_rms`` dashed; log-log axes."""
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
    ax.set_yticks(ticks, [f"{t:g}" if t >= 1 else f"1/{1 / t:g}" for t in ticks])
    ax.set_xticks(d_models, [str(int(d)) for d in d_models])
    ax.set(ylim=(low, high), xlabel="d_model", ylabel="RMS of one entry (log scale)",
           title="What gets added to the positional encoding: the token's vector")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9, loc="upper left", framealpha=0.95)
    fig.tight_layout()
    return fig
