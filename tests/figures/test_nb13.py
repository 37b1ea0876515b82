"""The drawings of notebook 13 (which rank trains on which pairs, loss curves of several runs, a
step of data parallelism, FSDP's all-gather and reduce-scatter)."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from helpers.distributed import micro_batches
from helpers.figures import (
    data_parallel_figure,
    distributed_loss_figure,
    fsdp_figure,
    sharding_figure,
)


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


def test_data_parallel_figure_has_both_ranks_and_one_all_reduce_between_them():
    fig = data_parallel_figure()
    try:
        texts = [t.get_text() for t in fig.axes[0].texts]
        assert "rank 0 (process 0)" in texts and "rank 1 (process 1)" in texts
        assert "forward + backward: gradient g₀" in texts
        assert [t for t in texts if "all-reduce" in t] == [
            "all-reduce during backward: every rank gets (g₀ + g₁) / 2"]
        assert texts.count("clip, Adam: θ ← the same update") == 2
    finally:
        plt.close(fig)


def test_fsdp_figure_holds_halves_then_the_whole_layer_then_the_mean_of_a_half():
    fig = fsdp_figure()
    try:
        texts = [t.get_text() for t in fig.axes[0].texts]
        cells = [t for t in texts if t and len(t) < 14 and not t.startswith("rank")]
        # stage by stage, rank 0's two halves then rank 1's
        assert cells[:8] == ["W₀", "–", "–", "W₁", "W₀", "W₁", "W₀", "W₁"]
        assert cells[12:16] == ["(g₀⁰+g₀¹)/2", "–", "–", "(g₁⁰+g₁¹)/2"]
    finally:
        plt.close(fig)
