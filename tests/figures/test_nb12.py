"""The drawings of notebook 12 (the two architectures, the sampling filters, the ablation)."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from helpers.figures import ablation_figure, decoder_only_figure, next_token_figure


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
