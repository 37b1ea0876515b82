"""Notebook 11's head ablation (helpers/ablation.py): a head removed is a head whose columns of
W_O are zero, inside the with-block only."""

import copy

import torch

from helpers.ablation import ablated, zero_head
from helpers.attention import MultiHeadAttention


def test_zero_head_zeroes_one_head_and_copies():
    merged = torch.randn(2, 3, 12)
    out = zero_head(merged, 1, num_heads=3)  # d_k = 4: features 4..7
    assert (out[..., 4:8] == 0).all()
    assert torch.equal(out[..., :4], merged[..., :4]) and torch.equal(out[..., 8:], merged[..., 8:])
    assert (merged[..., 4:8] != 0).all()  # the input is left as it was


def test_ablated_equals_zero_columns_of_w_o_inside_the_block_only():
    torch.manual_seed(0)
    attention = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        intact = attention(x, x, x)
        without = copy.deepcopy(attention)
        for head in (1, 3):  # d_k = 4
            without.w_o.weight[:, 4 * head:4 * head + 4] = 0
        with ablated(attention, [1, 3]):
            removed = attention(x, x, x)
        after = attention(x, x, x)
    torch.testing.assert_close(removed, without(x, x, x))
    assert not torch.allclose(removed, intact)
    assert torch.equal(after, intact)  # the hook is gone
