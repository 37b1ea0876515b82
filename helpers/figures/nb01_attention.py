"""Why attention divides by sqrt(d_k), from random q . k drawn with NumPy (notebook 01)."""

import matplotlib.pyplot as plt
import numpy as np

from .style import CONTRAST

SATURATION_D_K = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def _softmax(scores):
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_saturation_data(d_k, num_keys=10, seed=0):
    """"unscaled" and "scaled": one random query's softmax weights over ``num_keys`` keys, sorted,
    without and with the division by sqrt(d_k); "max_unscaled" and "max_scaled": the largest
    weight of a row (mean of 300 queries) for each d_k of "grid" (``SATURATION_D_K``)."""
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal(d_k), rng.standard_normal((num_keys, d_k))
    scores = k @ q  # (num_keys,), variance d_k
    data = {"unscaled": np.sort(_softmax(scores))[::-1],
            "scaled": np.sort(_softmax(scores / np.sqrt(d_k)))[::-1],
            "grid": np.array(SATURATION_D_K)}
    curve_rng = np.random.default_rng(seed + 1)  # its own stream: the curves never move with d_k
    largest = []
    for n in SATURATION_D_K:
        qs = curve_rng.standard_normal((300, 1, n))
        ks = curve_rng.standard_normal((300, num_keys, n))
        s = (qs * ks).sum(axis=-1)  # (300 queries, num_keys)
        largest.append([_softmax(s).max(axis=-1).mean(),
                        _softmax(s / np.sqrt(n)).max(axis=-1).mean()])
    data["max_unscaled"], data["max_scaled"] = np.array(largest).T
    return data


def softmax_saturation_figure(d_k=64, num_keys=10):
    """Left: one query's sorted weights over ``num_keys`` random keys at this ``d_k``, with and
    without the scale. Right: the mean largest weight of a row as d_k grows."""
    data = softmax_saturation_data(d_k, num_keys=num_keys)
    unscaled, scaled = CONTRAST
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    ranks = np.arange(1, num_keys + 1)
    left.bar(ranks - 0.2, data["unscaled"], width=0.4, color=unscaled,
             label=f"softmax(q·k): largest {data['unscaled'][0]:.2f}")
    left.bar(ranks + 0.2, data["scaled"], width=0.4, color=scaled,
             label=f"softmax(q·k / √d_k): largest {data['scaled'][0]:.2f}")
    left.axhline(1 / num_keys, color="grey", linestyle=":", label=f"uniform (1/{num_keys})")
    left.set(xticks=ranks, ylim=(0, 1.05), xlabel="keys, sorted by weight",
             ylabel="softmax weight", title=f"one query, {num_keys} random keys, d_k = {d_k}")
    left.legend(loc="upper right", fontsize=9)
    right.plot(data["grid"], data["max_unscaled"], "o-", color=unscaled, label="q·k")
    right.plot(data["grid"], data["max_scaled"], "o-", color=scaled, label="q·k / √d_k")
    right.axhline(1 / num_keys, color="grey", linestyle=":", label="uniform")
    right.axvline(d_k, color="black", linestyle="--", linewidth=1, label=f"d_k = {d_k}")
    right.set_xscale("log", base=2)
    right.set_xticks(data["grid"], [str(n) for n in data["grid"]])
    right.set(ylim=(0, 1.05), xlabel="d_k (log scale)", ylabel="largest weight in a row (mean)",
              title="the unscaled softmax saturates as d_k grows")
    right.legend(loc="best", fontsize=9)  # the curves move with num_keys
    fig.tight_layout()
    return fig
