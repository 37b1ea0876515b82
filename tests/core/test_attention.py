"""Attention: parity with PyTorch, masking without NaN, friendly errors, gradcheck."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers.attention import (
    MultiHeadAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from helpers.interop import to_torch, torch_attn_mask
from helpers.masks import causal_mask, padding_mask

TOL = 1e-5


def max_err(a, b):
    return (a - b).abs().max().item()


@pytest.mark.parametrize("shape", [(5, 8), (2, 5, 8), (2, 3, 7, 16)])
def test_sdpa_matches_torch_without_mask(shape):
    q, k, v = (torch.randn(shape) for _ in range(3))
    ours, weights = scaled_dot_product_attention(q, k, v)
    assert max_err(ours, F.scaled_dot_product_attention(q, k, v)) <= TOL
    assert torch.allclose(weights.sum(-1), torch.ones(shape[:-1]))


def test_sdpa_matches_torch_with_causal_and_padding_masks():
    B, h, L, d_k = 2, 3, 6, 8
    q, k, v = (torch.randn(B, h, L, d_k) for _ in range(3))
    tokens = torch.tensor([[5, 6, 7, 8, 0, 0], [5, 6, 7, 8, 9, 3]])
    mask = causal_mask(L) & padding_mask(tokens, pad_id=0)  # (B, 1, L, L)
    ours, _ = scaled_dot_product_attention(q, k, v, mask)
    assert max_err(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=mask)) <= TOL


def test_sdpa_cross_attention_lq_differs_from_lk_and_dv_differs_from_dk():
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 4)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 3, 4) and weights.shape == (2, 3, 5)
    assert max_err(out, F.scaled_dot_product_attention(q, k, v)) <= TOL


def test_scale_is_sqrt_d_k():
    q, k = torch.randn(1, 1, 16), torch.randn(1, 4, 16)
    _, weights = scaled_dot_product_attention(q, k, k)
    expected = (q @ k.transpose(-2, -1) / 4.0).softmax(-1)
    assert max_err(weights, expected) <= 1e-6


def test_masked_keys_get_zero_weight_and_rows_sum_to_one():
    q, k, v = torch.randn(1, 4, 8), torch.randn(1, 4, 8), torch.randn(1, 4, 8)
    mask = torch.tensor([[[True, True, False, True]]])  # (1, 1, Lk): same keys for every query
    _, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(weights[..., 2] == 0)
    assert torch.allclose(weights.sum(-1), torch.ones(1, 4))


def test_fully_masked_row_gives_zeros_not_nan_forward_and_backward():
    q, k, v = (torch.randn(1, 3, 4, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[[True, True, False], [False, False, False], [True, True, True]]])
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(out[0, 1] == 0) and torch.all(weights[0, 1] == 0)
    assert not torch.isnan(out).any()
    out.sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()


def test_dropout_is_applied_to_the_weights():
    torch.manual_seed(1)
    q, k, v = torch.randn(1, 6, 8), torch.randn(1, 6, 8), torch.eye(6)[None].repeat(1, 1, 1)
    v = torch.eye(6)[None]  # output row = the weights actually used
    drop = nn.Dropout(0.5).train()
    out, weights = scaled_dot_product_attention(q, k, v, dropout=drop)
    zeroed = out == 0
    assert zeroed.any(), "dropout should zero some weights"
    kept = ~zeroed
    assert torch.allclose(out[kept], weights[kept] * 2)  # survivors scaled by 1 / (1 - p)


def test_gradcheck_attention_float64():
    q, k, v = (torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[[True, False, True], [True, True, True], [False, False, False]]])
    assert torch.autograd.gradcheck(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)[0], (q, k, v))


@pytest.mark.parametrize("bad, message", [
    (dict(q=(2, 3, 8), k=(2, 4, 6), v=(2, 4, 6)), "share their last size d_k"),
    (dict(q=(2, 3, 8), k=(2, 4, 8), v=(2, 5, 8)), "same number of positions Lk"),
    (dict(q=(8,), k=(4, 8), v=(4, 8)), "attention expects query"),
])
def test_sdpa_bad_shapes_give_clear_errors(bad, message):
    q, k, v = torch.randn(bad["q"]), torch.randn(bad["k"]), torch.randn(bad["v"])
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(q, k, v)


def test_sdpa_bad_masks_give_clear_errors():
    q = torch.randn(2, 3, 8)
    with pytest.raises(TypeError, match="bool"):
        scaled_dot_product_attention(q, q, q, torch.zeros(3, 3))
    with pytest.raises(ValueError, match=r"\(4, 4\).*\(2, 3, 3\)"):
        scaled_dot_product_attention(q, q, q, torch.ones(4, 4, dtype=torch.bool))


# ---------------------------------------------------------------- heads
def test_split_heads_gives_each_head_a_contiguous_block():
    B, L, h, d_k = 2, 3, 4, 6  # d_model = 24: a wrong split cannot hide (d_k != h)
    x = torch.arange(B * L * h * d_k, dtype=torch.float32).view(B, L, h * d_k)
    heads = split_heads(x, h)
    assert heads.shape == (B, h, L, d_k)
    for i in range(h):
        assert torch.equal(heads[:, i], x[..., i * d_k:(i + 1) * d_k])
    assert torch.equal(merge_heads(heads), x)


# ---------------------------------------------------------------- multi-head attention
def pair(d_model=24, num_heads=4, bias=True):
    ours = MultiHeadAttention(d_model, num_heads, bias=bias).eval()
    return ours, to_torch(ours).eval()


@pytest.mark.parametrize("d_model, num_heads", [(24, 4), (16, 4), (32, 8), (12, 1)])
@pytest.mark.parametrize("bias", [True, False])
def test_mha_matches_torch_self_attention(d_model, num_heads, bias):
    ours, theirs = pair(d_model, num_heads, bias)
    x = torch.randn(3, 5, d_model)
    out = ours(x, x, x)
    ref, ref_weights = theirs(x, x, x, need_weights=True, average_attn_weights=False)
    assert max_err(out, ref) <= TOL
    assert max_err(ours.attention_weights, ref_weights) <= TOL
    assert ours.attention_weights.shape == (3, num_heads, 5, 5)


def test_mha_matches_torch_cross_attention_with_padding_mask():
    ours, theirs = pair()
    query, memory = torch.randn(2, 3, 24), torch.randn(2, 7, 24)
    tokens = torch.tensor([[4, 4, 4, 4, 4, 0, 0], [4, 4, 4, 4, 4, 4, 4]])
    mask = padding_mask(tokens, 0)  # (B, 1, 1, Lk)
    out = ours(query, memory, memory, mask)
    ref, _ = theirs(query, memory, memory, key_padding_mask=~mask[:, 0, 0])
    assert out.shape == (2, 3, 24)
    assert max_err(out, ref) <= TOL
    assert torch.all(ours.attention_weights[0, :, :, 5:] == 0)


@pytest.mark.parametrize("mask_kind", ["11LL causal", "B1LL causal+padding"])
def test_mha_matches_torch_with_masks(mask_kind):
    ours, theirs = pair()
    B, L = 2, 6
    x = torch.randn(B, L, 24)
    tokens = torch.tensor([[3, 3, 3, 3, 0, 0], [3, 3, 3, 3, 3, 3]])
    mask = causal_mask(L)[None, None] if mask_kind == "11LL causal" else (
        causal_mask(L) & padding_mask(tokens, 0))
    out = ours(x, x, x, mask)
    ref, _ = theirs(x, x, x, attn_mask=torch_attn_mask(mask, B, 4))
    assert max_err(out, ref) <= TOL


def test_mha_gradients_match_torch():
    ours, theirs = pair()
    ours.train(), theirs.train()  # dropout is 0: train mode must also agree
    x = torch.randn(2, 4, 24, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    ours(x, x, x).square().sum().backward()
    theirs(x2, x2, x2)[0].square().sum().backward()
    assert max_err(x.grad, x2.grad) <= 1e-4
    assert max_err(ours.w_o.weight.grad, theirs.out_proj.weight.grad) <= 1e-4


def test_mha_indivisible_heads_error_names_both_numbers():
    with pytest.raises(ValueError, match=r"d_model=30.*num_heads=4"):
        MultiHeadAttention(30, 4)


def test_mha_wrong_input_width_gives_clear_error():
    mha = MultiHeadAttention(24, 4)
    with pytest.raises(ValueError, match=r"d_model=24.*\(2, 5, 16\)"):
        mha(torch.randn(2, 5, 16), torch.randn(2, 5, 16), torch.randn(2, 5, 16))
    with pytest.raises(ValueError, match="does not broadcast"):
        x = torch.randn(2, 5, 24)
        mha(x, x, x, torch.ones(3, 5, 5, dtype=torch.bool)[:, None])
