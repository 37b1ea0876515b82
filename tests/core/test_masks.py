"""Masks: the course's convention (True = may attend), shapes and combination by broadcasting."""

import pytest
import torch

from helpers.masks import causal_mask, padding_mask


def test_causal_mask_values():
    expected = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_mask(3), expected)
    assert causal_mask(1).item() is True


def test_padding_mask_shape_and_polarity():
    tokens = torch.tensor([[7, 8, 0], [7, 0, 0]])
    mask = padding_mask(tokens, pad_id=0)
    assert mask.shape == (2, 1, 1, 3) and mask.dtype == torch.bool
    assert mask[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]


def test_masks_combine_by_broadcasting():
    tokens = torch.tensor([[7, 8, 0], [7, 0, 0]])
    combined = causal_mask(3) & padding_mask(tokens, 0)
    assert combined.shape == (2, 1, 3, 3)
    assert combined[0, 0].tolist() == [[True, False, False], [True, True, False],
                                       [True, True, False]]


@pytest.mark.parametrize("bad", [0, -2, 2.5])
def test_causal_mask_bad_size(bad):
    with pytest.raises(ValueError, match="positive int size"):
        causal_mask(bad)


def test_padding_mask_bad_shape():
    with pytest.raises(ValueError, match=r"\(B, L\).*\(5,\)"):
        padding_mask(torch.tensor([1, 2, 0, 0, 0]), 0)
