"""The drawing of notebook 05: the embedding scale (its attention grid is tested with the maps)."""

import matplotlib.pyplot as plt
import numpy as np

from helpers.figures import embedding_scale_figure


def test_embedding_scale_figure_draws_each_series_and_the_reference():
    d_models = [16, 64, 256]
    series = {"small": [d ** -0.5 for d in d_models], "scaled": [1.0, 1.0, 1.0],
              "loud": [d ** 0.5 for d in d_models]}
    fig = embedding_scale_figure(d_models, series, pe_rms=2 ** -0.5)
    try:
        ax = fig.axes[0]
        lines = {line.get_label(): line for line in ax.get_lines()}
        for label, values in series.items():
            np.testing.assert_allclose(lines[label].get_xdata(), d_models)
            np.testing.assert_allclose(lines[label].get_ydata(), values)
        reference = [line for label, line in lines.items() if label.startswith("positional")]
        assert len(reference) == 1
        np.testing.assert_allclose(reference[0].get_ydata(), 2 ** -0.5)
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        # every drawn value lies inside the visible range
        low, high = ax.get_ylim()
        assert low <= 16 ** -0.5 and high >= 256 ** 0.5
        assert [t.get_text() for t in ax.get_xticklabels()] == ["16", "64", "256"]
    finally:
        plt.close(fig)

