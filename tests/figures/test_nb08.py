"""The drawings of notebook 08 (next-token probabilities, where the parameters live)."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.patches import Rectangle

from helpers.figures import next_token_probabilities_figure, parameter_breakdown_figure


def test_next_token_probabilities_draws_values_frames_and_the_uniform_line():
    probs = torch.softmax(torch.randn(3, 5), dim=-1)
    rows, vocab = ["0: <bos>", "1: a", "2: b"], ["<pad>", "a", "b", "c", "."]
    fig = next_token_probabilities_figure(probs, rows, vocab, targets=[1, 2, 4], title="t")
    try:
        ax, bar = fig.axes
        np.testing.assert_allclose(ax.images[0].get_array(), probs.numpy(), atol=1e-6)
        assert ax.images[0].norm.vmin == 0 and ax.images[0].norm.vmax == pytest.approx(
            probs.max().item())
        texts = [t.get_text() for t in ax.texts]
        assert texts == [f"{p:.2f}" for p in probs.flatten().tolist()]  # every cell, row by row
        frames = [p for p in ax.patches if isinstance(p, Rectangle)]
        assert [(p.get_x() + 0.5, p.get_y() + 0.5) for p in frames] == [(1, 0), (2, 1), (4, 2)]
        assert [t.get_text() for t in ax.get_xticklabels()] == vocab
        assert [t.get_text() for t in ax.get_yticklabels()] == rows
        uniform = [line.get_ydata()[0] for line in bar.get_lines()]
        assert uniform == [pytest.approx(1 / 5)]
        assert "1/V" in bar.get_ylabel()
        assert ax.get_title() == "t"
    finally:
        plt.close(fig)


def test_next_token_probabilities_without_targets_and_a_wrong_shape():
    fig = next_token_probabilities_figure(np.full((2, 4), 0.25), ["x", "y"], list("abcd"))
    try:
        assert not [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match=r"must have shape .* \(2, 3\), got \(2, 4\)"):
        next_token_probabilities_figure(np.zeros((2, 4)), ["x", "y"], list("abc"))


def test_parameter_breakdown_stacks_segments_and_writes_totals():
    breakdowns = {"three": {"encoder": 20e6, "decoder": 25e6, "embeddings": 56e6},
                  "one": {"encoder": 20e6, "decoder": 25e6, "shared": 19e6}}
    fig = parameter_breakdown_figure(breakdowns, reference=65e6, reference_label="paper: 65M")
    try:
        ax = fig.axes[0]
        bars = ax.patches
        # one rectangle per component and model, in millions, stacked from 0
        widths = [round(b.get_width(), 6) for b in bars]
        lefts = [round(b.get_x(), 6) for b in bars]
        assert widths == [20, 25, 56, 20, 25, 19]
        assert lefts == [0, 20, 45, 0, 20, 45]
        # a component keeps its colour in every bar; different components differ
        assert bars[0].get_facecolor() == bars[3].get_facecolor()
        assert bars[2].get_facecolor() != bars[5].get_facecolor()
        texts = [t.get_text() for t in ax.texts]
        assert "101.0M" in texts and "64.0M" in texts
        assert "56.0" in texts and "20.0" in texts  # segment sizes written inside
        line = ax.get_lines()[0]
        assert line.get_xdata()[0] == pytest.approx(65)
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        assert legend == ["paper: 65M", "encoder", "decoder", "embeddings", "shared"]  # once each
        assert [t.get_text() for t in ax.get_yticklabels()] == ["three", "one"]
        assert ax.get_xlim()[1] > 101  # the longest bar and its label fit
    finally:
        plt.close(fig)
