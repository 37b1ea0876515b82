"""The drawings of notebook 12 (the two architectures, the training curves, the GPT's attention,
the sampling filters, rotary positions, the ablation)."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from helpers.figures import (
    ablation_figure,
    decoder_only_figure,
    gpt_attention_figure,
    gpt_training_figure,
    next_token_figure,
    rope_figure,
)


def test_decoder_only_figure_has_both_models_and_no_cross_attention_on_the_right():
    fig = decoder_only_figure()
    try:
        texts = [(t.get_text(), t.get_position()[0]) for t in fig.axes[0].texts]
        right = [text for text, x in texts if x > 7.75]
        left = [text for text, x in texts if x < 7.75]
        assert "cross-attention" in left and "cross-attention" not in right
        assert "masked self-attention" in right and "<bos> English <sep> French so far" in right
    finally:
        plt.close(fig)


def test_next_token_figure_shows_the_models_top_tokens_and_what_the_filter_keeps():
    probs = torch.tensor([0.05, 0.6, 0.3, 0.05])
    kept = torch.tensor([0.0, 0.6 / 0.9, 0.3 / 0.9, 0.0])
    fig = next_token_figure(probs, kept, ["a", "b", "c", "d"], title="t", top=3)
    try:
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["b", "c", "a"]
        heights = [bar.get_height() for bar in ax.patches]
        np.testing.assert_allclose(heights[:3], [0.6, 0.3, 0.05], rtol=1e-6)  # the model
        np.testing.assert_allclose(heights[3:], [0.6 / 0.9, 0.3 / 0.9, 0.0], rtol=1e-6)
    finally:
        plt.close(fig)
    with pytest.raises(ValueError):
        next_token_figure(torch.ones(2, 3), kept, ["a"])


def test_ablation_figure_has_one_bar_per_variant_at_the_seeds_mean():
    rows = [{"variant": v, "seed": s, "exact_match": 70.0 + 10 * i + s, "final_loss": 1.0 + i}
            for i, v in enumerate(["old", "new"]) for s in range(3)]
    fig = ablation_figure(rows)
    try:
        left = fig.axes[0]
        assert [t.get_text() for t in left.get_yticklabels()] == ["old", "new"]
        np.testing.assert_allclose([b.get_width() for b in left.patches], [71.0, 81.0])
    finally:
        plt.close(fig)


def test_next_token_figure_writes_the_samples_under_the_bars():
    probs = torch.tensor([0.5, 0.5])
    fig = next_token_figure(probs, probs, ["x", "y"], samples=["le chat", "la chatte"])
    try:
        assert [t.get_text() for t in fig.axes[1].texts] == ["sample 1: le chat",
                                                             "sample 2: la chatte"]
    finally:
        plt.close(fig)


def test_gpt_training_figure_draws_the_moving_average_of_each_run():
    fig = gpt_training_figure({"a": [4.0] * 10 + [2.0] * 10, "b": [3.0] * 20}, window=5)
    try:
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_legend().get_texts()] == [
            "a (mean of 5 steps)", "b (mean of 5 steps)"]
        np.testing.assert_allclose(ax.lines[0].get_xdata(), np.arange(5, 21))  # window's end
        assert ax.lines[0].get_ydata()[0] == 4.0 and ax.lines[0].get_ydata()[-1] == 2.0
        assert ax.get_yscale() == "log"
    finally:
        plt.close(fig)


def test_rope_figure_turns_one_vector_by_p_theta_and_keeps_the_angle_of_an_offset():
    fig = rope_figure(theta=0.3, positions=4, pairs=((2, 0), (5, 3)), q_angle=0.2, k_angle=-0.4)
    try:
        left, right = fig.axes

        def angles(ax):
            return [np.arctan2(*a.xy[::-1]) for a in ax.texts if hasattr(a, "arrow_patch")
                    and a.arrow_patch is not None]

        np.testing.assert_allclose(angles(left), [0.2 + 0.3 * p for p in range(4)], atol=1e-9)
        q1, k1, q2, k2 = angles(right)  # query p = 2, key r = 0, query p = 5, key r = 3
        np.testing.assert_allclose(q1 - k1, q2 - k2, atol=1e-9)  # the same angle between them
        assert [t.get_text() for t in right.texts if "rad" in t.get_text()] == ["1.20 rad"] * 2
    finally:
        plt.close(fig)


def test_gpt_attention_figure_greys_the_future_and_frames_the_french_rows_on_english_keys():
    weights = torch.tril(torch.ones(5, 5))
    weights = weights / weights.sum(-1, keepdim=True)
    fig = gpt_attention_figure(weights, ["<bos>", "cat", "<sep>", "chat", "<eos>"], sep=2)
    try:
        ax = fig.axes[0]
        frame = [p for p in ax.patches if p.get_edgecolor()[:3] != (0, 0, 0)][-1]
        assert frame.get_xy() == (0.5, 1.5) and frame.get_width() == 1 and frame.get_height() == 3
        assert [t.get_text() for t in ax.get_xticklabels()][2] == "<sep>"
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="expected weights"):
        gpt_attention_figure(weights, ["a", "b"], sep=1)
