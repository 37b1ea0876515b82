"""Figures of notebook 06 (masks), checked without widgets: the values behind each figure."""

import numpy as np
import pytest
import torch

from helpers.figures import mask_explorer_figure, plot_bool_masks
from helpers.masks import EXPLORER_MAX_LEN, causal_mask, mask_explorer_data, padding_mask


def _drawn(ax):
    """The array behind an axes' first image, as (data, hidden cells)."""
    array = ax.images[0].get_array()
    return np.asarray(array.data), np.ma.getmaskarray(array)


def _cell_texts(ax):
    return [t.get_text() for t in ax.texts]


CASES = [(6, 2, True), (6, 2, False), (1, 0, True), (9, 0, True), (EXPLORER_MAX_LEN, 5, False),
         (5, 5, True), (7, 6, False)]


@pytest.mark.parametrize("seq_len, pad_len, causal", CASES)
def test_explorer_mask_is_causal_and_padding(seq_len, pad_len, causal):
    mask = mask_explorer_data(seq_len, pad_len, causal)["mask"]
    assert mask.shape == (seq_len, seq_len) and mask.dtype == bool
    real = np.arange(seq_len) < seq_len - pad_len
    expected = np.broadcast_to(real, (seq_len, seq_len))
    if causal:
        expected = expected & np.tril(np.ones((seq_len, seq_len), bool))
    np.testing.assert_array_equal(mask, expected)


@pytest.mark.parametrize("seq_len, pad_len, causal", CASES)
def test_drawn_weights_are_zero_exactly_where_the_mask_blocks(seq_len, pad_len, causal):
    fig = mask_explorer_figure(seq_len, pad_len, causal)
    mask_ax, weights_ax = fig.axes[0], fig.axes[1]
    drawn_mask, _ = _drawn(mask_ax)
    weights, hidden = _drawn(weights_ax)
    mask = drawn_mask.astype(bool)
    np.testing.assert_array_equal(mask, mask_explorer_data(seq_len, pad_len, causal)["mask"])
    assert not np.isnan(weights).any()
    assert np.all(weights[~mask] == 0.0)
    assert np.all(weights[mask] > 0.0)  # softmax never gives an allowed key exactly 0 here
    np.testing.assert_array_equal(hidden, ~mask)  # blocked cells are greyed out
    rows_with_a_key = mask.any(axis=1)
    np.testing.assert_allclose(weights.sum(axis=1), rows_with_a_key.astype(float), atol=1e-6)


def test_weights_match_the_reference_attention():
    from helpers.attention import scaled_dot_product_attention

    data = mask_explorer_data(5, 1, True, seed=3, d_k=8)
    generator = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, EXPLORER_MAX_LEN, 8, generator=generator)[:, :5]
    mask = causal_mask(5) & padding_mask(torch.tensor([[1, 1, 1, 1, 0]]), 0)[0, 0]
    _, expected = scaled_dot_product_attention(q, k, k, mask)
    np.testing.assert_allclose(data["weights"], expected.numpy(), atol=1e-7)


def test_queries_and_keys_do_not_move_with_padding_or_causal():
    """Only the mask changes between slider positions of pad_len and causal, not q and k."""
    free = mask_explorer_data(6, 0, False)["weights"]
    padded = mask_explorer_data(6, 2, False)["weights"]
    # renormalising the free weights over the 4 real keys gives the padded ones
    expected = free[:, :4] / free[:, :4].sum(axis=1, keepdims=True)
    np.testing.assert_allclose(padded[:, :4], expected, rtol=1e-5)
    assert not np.allclose(mask_explorer_data(6, 0, False, seed=1)["weights"], free)


def test_titles_carry_the_slider_values():
    fig = mask_explorer_figure(7, 3, False, seed=2)
    title = fig.axes[0].get_title()
    assert "L = 7" in title and "padding = 3" in title and "causal off" in title
    assert "seed 2" in fig.axes[1].get_title()
    assert "causal on" in mask_explorer_figure(7, 3, True).axes[0].get_title()


def test_tick_labels_name_real_tokens_and_pads():
    fig = mask_explorer_figure(5, 2, True)
    for ax in fig.axes[:2]:
        assert [t.get_text() for t in ax.get_xticklabels()] == ["t0", "t1", "t2", "<pad>", "<pad>"]
        assert [t.get_text() for t in ax.get_yticklabels()] == ["t0", "t1", "t2", "<pad>", "<pad>"]


def test_padding_longer_than_the_sequence_is_clamped_and_said():
    data = mask_explorer_data(4, 9, True)
    assert data["pad_len"] == 4 and data["clamped"]
    assert not data["mask"].any()
    fig = mask_explorer_figure(4, 9, True)
    assert "padding = 4" in fig.axes[0].get_title() and "clamped" in fig.axes[0].get_title()
    assert "clamped" not in mask_explorer_figure(4, 4, True).axes[0].get_title()


def test_fully_padded_sequence_draws_zeros_not_nan():
    fig = mask_explorer_figure(5, 5, True)
    weights, hidden = _drawn(fig.axes[1])
    assert not np.isnan(weights).any()
    assert np.all(weights == 0.0) and hidden.all()
    assert any("all weights are 0" in text for text in _cell_texts(fig.axes[1]))


@pytest.mark.parametrize("seq_len, pad_len", [(0, 0), (EXPLORER_MAX_LEN + 1, 0), (5, -1)])
def test_bad_slider_values_give_clear_errors(seq_len, pad_len):
    with pytest.raises(ValueError, match="seq_len|pad_len"):
        mask_explorer_figure(seq_len, pad_len, True)


def test_small_explorer_cells_carry_their_weights():
    data = mask_explorer_data(4, 1, True)
    texts = _cell_texts(mask_explorer_figure(4, 1, True).axes[1])
    expected = [f"{w:.2f}" for w in data["weights"][data["mask"]]]
    assert texts == expected


def test_bool_masks_show_ones_and_zeros_in_every_panel():
    tokens = torch.tensor([[5, 7, 9, 4, 0], [3, 8, 0, 0, 0]])
    combined = causal_mask(5) & padding_mask(tokens, 0)
    panels = [causal_mask(5), padding_mask(tokens, 0)[0, 0], combined[1, 0]]
    fig = plot_bool_masks(panels, titles=["causal", "padding", "combined"])
    assert [ax.get_title() for ax in fig.axes] == ["causal", "padding", "combined"]
    for ax, panel in zip(fig.axes, panels, strict=True):
        drawn, _ = _drawn(ax)
        np.testing.assert_array_equal(drawn.astype(bool), panel.numpy())
        assert _cell_texts(ax) == [str(int(v)) for v in panel.flatten()]


def test_bool_masks_reject_a_batch_of_masks_with_a_hint():
    mask = causal_mask(3) & padding_mask(torch.tensor([[1, 1, 0], [1, 0, 0]]), 0)  # (2, 1, 3, 3)
    with pytest.raises(ValueError, match=r"mask\[0, 0\]"):
        plot_bool_masks([mask])
    fig = plot_bool_masks([mask[:1]])  # (1, 1, 3, 3): one sequence and head, drawn as (3, 3)
    assert fig.axes[0].images[0].get_array().shape == (3, 3)
