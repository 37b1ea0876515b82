"""The drawings of notebook 13 (which rank trains on which pairs, loss curves of several runs)."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from helpers.distributed import micro_batches
from helpers.figures import distributed_loss_figure, sharding_figure


def test_sharding_figure_puts_each_ranks_items_in_its_colour_and_order():
    ranks = [micro_batches(list(range(40)), r, 2, 4, seed=1) for r in range(2)]
    shares = torch.tensor([[next(r) for _ in range(3)] for r in ranks])  # (2 ranks, 3 steps, 4)
    fig = sharding_figure(shares)
    try:
        ax = fig.axes[0]
        colours = np.asarray(ax.images[0].get_array())  # (3, 8): the rank of each cell
        np.testing.assert_array_equal(colours, np.tile([0, 1], (3, 4)))
        texts = np.array([int(t.get_text()) for t in ax.texts]).reshape(3, 8)
        np.testing.assert_array_equal(texts[:, 0::2], shares[0].numpy())
        np.testing.assert_array_equal(texts[:, 1::2], shares[1].numpy())
        assert len(set(texts.ravel())) == 24  # three steps, no item twice
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["rank 0", "rank 1"]
        assert "B = 8" in ax.get_title()
    finally:
        plt.close(fig)


def test_sharding_figure_rejects_a_flat_list_and_too_many_ranks():
    with pytest.raises(ValueError, match="ranks, steps, items per rank"):
        sharding_figure([1, 2, 3])
    with pytest.raises(ValueError, match="at most 4 ranks, got 5"):
        sharding_figure(np.zeros((5, 1, 2)))


def test_distributed_loss_figure_draws_every_run():
    curves = {"1 process": [3.0, 2.0, 1.0], "2 processes": [3.0, 2.0, 1.0001]}
    fig = distributed_loss_figure(curves, title="same curve")
    try:
        ax = fig.axes[0]
        assert [line.get_linestyle() for line in ax.lines] == ["-", "--"]
        np.testing.assert_allclose(ax.lines[1].get_ydata(), curves["2 processes"])
        assert ax.get_yscale() == "linear" and ax.get_title() == "same curve"
    finally:
        plt.close(fig)
