"""The drawings of notebook 11 (attention grids, the explorer, alignment accuracies)."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from helpers.figures import (
    alignment_accuracy_figure,
    attention_explorer_figure,
    attention_grid_figure,
)


def _maps(seed=0):
    """A fake dict of notebook 11: 2 layers, 3 heads, "the red car" -> "la voiture rouge"."""
    g = torch.Generator().manual_seed(seed)
    S, T = 3, 4
    decoder = torch.rand(2, 3, T, T, generator=g).masked_fill(
        torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf")).softmax(-1)
    return {"english": "the red car", "french": "la voiture rouge",
            "src_tokens": ["the", "red", "car"], "tgt_in": ["<bos>", "la", "voiture", "rouge"],
            "tgt_out": ["la", "voiture", "rouge", "<eos>"],
            "encoder": torch.rand(2, 3, S, S, generator=g).softmax(-1),
            "decoder": decoder, "cross": torch.rand(2, 3, T, S, generator=g).softmax(-1)}


def _labels(ticks):
    return [t.get_text() for t in ticks]


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_explorer_draws_the_chosen_map_with_its_labels(kind):
    maps = _maps()
    fig = attention_explorer_figure(maps, kind=kind, layer=1, head=2)
    try:
        ax = fig.axes[0]
        shown = ax.images[0].get_array()
        np.testing.assert_allclose(shown.data, maps[kind][1, 2].numpy(), atol=1e-6)
        queries = ["<bos> → la", "la → voiture", "voiture → rouge", "rouge → <eos>"]
        if kind == "encoder":
            assert _labels(ax.get_yticklabels()) == maps["src_tokens"]
        else:
            assert _labels(ax.get_yticklabels()) == queries
        keys = maps["tgt_in"] if kind == "decoder" else maps["src_tokens"]
        assert _labels(ax.get_xticklabels()) == keys
        hidden = np.ma.getmaskarray(shown)
        if kind == "decoder":  # the future is grey, everything else coloured
            assert hidden.tolist() == np.triu(np.ones((4, 4), bool), 1).tolist()
        else:
            assert not hidden.any()
        assert "layer 1, head 2" in ax.get_title() and "la voiture rouge" in ax.get_title()
        assert ax.images[0].norm.vmin == 0 and ax.images[0].norm.vmax == 1
    finally:
        plt.close(fig)


def test_explorer_mean_of_heads_and_wrong_arguments():
    maps = _maps()
    fig = attention_explorer_figure(maps, kind="cross", layer=0, head="mean")
    try:
        np.testing.assert_allclose(fig.axes[0].images[0].get_array().data,
                                   maps["cross"][0].mean(0).numpy(), atol=1e-6)
        assert "mean of the heads" in fig.axes[0].get_title()
    finally:
        plt.close(fig)
    for kwargs in ({"kind": "memory"}, {"layer": 2}, {"head": 3}, {"head": "max"}):
        with pytest.raises(ValueError):
            attention_explorer_figure(maps, **kwargs)
    plt.close("all")


def test_explorer_prints_weights_but_not_near_zero_ones():
    maps = _maps()
    maps["cross"] = torch.zeros(2, 3, 4, 3)
    maps["cross"][..., 1] = 1.0  # every query looks at "red"
    fig = attention_explorer_figure(maps, kind="cross", layer=0, head=0)
    try:
        assert [t.get_text() for t in fig.axes[0].texts] == ["1.00"] * 4
    finally:
        plt.close(fig)


def test_attention_grid_has_one_panel_per_layer_and_head():
    maps = _maps()
    blocked = np.triu(np.ones((4, 4), bool), 1)
    fig = attention_grid_figure(maps["decoder"], maps["tgt_in"], maps["tgt_out"], title="t",
                                blocked=blocked)
    try:
        panels = [ax for ax in fig.axes if ax.images]
        assert len(panels) == 6 + 0  # 2 layers x 3 heads (the colour bar has no image)
        for k, ax in enumerate(panels):
            layer, head = divmod(k, 3)
            assert ax.get_title() == f"layer {layer}, head {head}"
            shown = ax.images[0].get_array()
            np.testing.assert_allclose(shown.data, maps["decoder"][layer, head].numpy(),
                                       atol=1e-6)
            assert np.ma.getmaskarray(shown).tolist() == blocked.tolist()
        assert _labels(panels[0].get_yticklabels()) == maps["tgt_out"]
        assert _labels(panels[-1].get_xticklabels()) == maps["tgt_in"]
        assert fig.get_suptitle() == "t"
    finally:
        plt.close(fig)
    with pytest.raises(ValueError):
        attention_grid_figure(maps["decoder"][0], maps["tgt_in"], maps["tgt_out"])


def test_alignment_accuracy_prints_percentages_per_layer_and_head():
    accuracy = np.array([[[0.96, 1.0], [1.0, 1.0]], [[0.18, 0.6], [1.0, 0.999]]])
    fig = alignment_accuracy_figure(accuracy, ["adjectives", "nouns"], chance=0.147)
    try:
        panels = [ax for ax in fig.axes if ax.images]
        assert [ax.get_title() for ax in panels] == ["adjectives", "nouns"]
        assert [t.get_text() for t in panels[1].texts] == ["18%", "60%", "100%", "100%"]
        np.testing.assert_allclose(panels[0].images[0].get_array(), accuracy[0])
        assert _labels(panels[0].get_yticklabels()) == ["layer 0", "layer 1"]
        assert "15%" in fig.get_suptitle()
    finally:
        plt.close(fig)
    with pytest.raises(ValueError):
        alignment_accuracy_figure(accuracy, ["only one title"])
    plt.close("all")
