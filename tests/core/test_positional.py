"""Sinusoidal positional encoding: closed form, rotation property, module behaviour, errors."""

import math

import pytest
import torch
from torch import nn

from helpers.positional import PositionalEncoding, sinusoidal_encoding


def test_closed_form_every_entry():
    max_len, d_model, base = 12, 10, 10000.0
    pe = sinusoidal_encoding(max_len, d_model, base)
    assert pe.shape == (max_len, d_model) and pe.dtype == torch.float32
    for p in range(max_len):
        for i in range(d_model // 2):
            angle = p / base ** (2 * i / d_model)
            assert pe[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_first_row_and_first_column():
    pe = sinusoidal_encoding(50, 16)
    assert torch.equal(pe[0], torch.tensor([0.0, 1.0] * 8))  # P5: sin on even, cos on odd
    assert torch.allclose(pe[:, 0], torch.sin(torch.arange(50.0)), atol=1e-6)  # P3


def test_custom_base_changes_wavelengths():
    assert not torch.allclose(sinusoidal_encoding(20, 8, base=100.0), sinusoidal_encoding(20, 8))
    assert torch.allclose(sinusoidal_encoding(20, 8, base=100.0)[:, 2],
                          torch.sin(torch.arange(20.0) / 100.0 ** (2 / 8)), atol=1e-6)


@pytest.mark.parametrize("k", [1, 3, 17])
def test_pe_p_plus_k_is_a_fixed_rotation_of_pe_p(k):
    d_model, base = 16, 10000.0
    pe = sinusoidal_encoding(64, d_model, base).double()
    omega = 1.0 / base ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i, w in enumerate(omega):
        c, s = math.cos(k * w), math.sin(k * w)
        # [sin(a + b), cos(a + b)] = [[cos b, sin b], [-sin b, cos b]] @ [sin a, cos a]
        M[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor([[c, s], [-s, c]])
    predicted = pe[:-k] @ M.T  # the same M for every position p
    assert (predicted - pe[k:]).abs().max() < 1e-5
    # a rotation: lengths are kept, and M_k M_k^T = I
    assert torch.allclose(M @ M.T, torch.eye(d_model, dtype=torch.float64), atol=1e-12)
    # and it is specific to k: it does not predict PE(p + k - 1)
    assert (pe[:-k] @ M.T - pe[k - 1:-1]).abs().max() > 0.1


def test_dot_product_depends_only_on_distance():
    pe = sinusoidal_encoding(40, 32)
    gram = pe @ pe.T
    for k in range(5):
        diagonal = torch.diagonal(gram, offset=k)
        assert (diagonal - diagonal[0]).abs().max() < 1e-4


def test_module_adds_the_table_as_a_buffer():
    module = PositionalEncoding(8, max_len=20)
    assert "pe" in dict(module.named_buffers()) and len(list(module.parameters())) == 0
    x = torch.randn(2, 5, 8)
    assert torch.allclose(module(x), x + sinusoidal_encoding(20, 8)[:5])
    assert torch.allclose(module(x, start=3), x + sinusoidal_encoding(20, 8)[3:8])


def test_module_dropout_in_train_mode_only():
    module = PositionalEncoding(8, dropout=0.5)
    x = torch.randn(4, 10, 8)
    assert torch.equal(module.eval()(x), module.eval()(x))
    assert (module.train()(x) == 0).any()


def test_errors():
    with pytest.raises(ValueError, match="even.*got 7"):
        sinusoidal_encoding(10, 7)
    with pytest.raises(ValueError, match=r"length 12.*max_len=10"):
        PositionalEncoding(8, max_len=10)(torch.randn(1, 12, 8))
    with pytest.raises(ValueError, match=r"d_model=8.*\(1, 4, 6\)"):
        PositionalEncoding(8)(torch.randn(1, 4, 6))


def test_positional_encoding_is_not_a_parameter_even_after_to():
    module = nn.Sequential(PositionalEncoding(8, max_len=16)).to(torch.float64)
    assert module[0].pe.dtype == torch.float64 and not list(module.parameters())
