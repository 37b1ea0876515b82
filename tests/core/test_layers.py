"""LayerNorm, feed-forward, encoder/decoder layers and stacks against torch.nn (via to_torch)."""

import pytest
import torch
from torch import nn

from helpers.interop import to_torch, torch_attn_mask, torch_key_padding_mask
from helpers.layers import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    FeedForward,
    LayerNorm,
    layer_norm,
)
from helpers.masks import causal_mask, padding_mask

TOL = 1e-5
D_MODEL, HEADS, D_FF = 24, 4, 48


def max_err(a, b):
    return (a - b).abs().max().item()


def randomise(module):
    """Non-trivial norms (gain 1 and bias 0 would hide a swapped or missing norm)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name or name in ("weight", "bias"):
                p.copy_(torch.randn_like(p) * 0.5 + (1.0 if name.endswith("weight") else 0.0))
    return module


def test_layer_norm_matches_torch():
    ours = randomise(LayerNorm(D_MODEL))
    theirs = to_torch(ours)
    assert isinstance(theirs, nn.LayerNorm)
    x = torch.randn(3, 5, D_MODEL) * 3 + 1
    assert max_err(ours(x), theirs(x)) <= TOL
    ref = nn.LayerNorm(D_MODEL)
    ref.load_state_dict(ours.state_dict())
    assert max_err(ours(x), ref(x)) <= TOL


def test_layer_norm_small_variance_eps_inside_root():
    x = torch.randn(2, 4) * 1e-3  # variance ~1e-6, comparable to eps: N2 would show here
    w, b = torch.ones(4), torch.zeros(4)
    assert max_err(layer_norm(x, w, b), nn.functional.layer_norm(x, (4,), w, b)) <= 1e-5


def test_gradcheck_layer_norm_float64():
    x = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(layer_norm, (x, w, b))


def test_layer_norm_wrong_width_error():
    with pytest.raises(ValueError, match=r"LayerNorm\(8\).*\(2, 3, 5\)"):
        LayerNorm(8)(torch.randn(2, 3, 5))


def test_feed_forward_is_position_wise():
    ff = FeedForward(D_MODEL, D_FF).eval()
    x = torch.randn(2, 6, D_MODEL)
    perm = torch.randperm(6)
    assert max_err(ff(x)[:, perm], ff(x[:, perm])) <= 1e-6
    expected = ff.linear2(torch.relu(ff.linear1(x)))
    assert max_err(ff(x), expected) <= 1e-6


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch(norm_first):
    ours = randomise(EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first)).eval()
    theirs = to_torch(ours)
    assert isinstance(theirs, nn.TransformerEncoderLayer) and not theirs.training
    assert theirs.norm_first == norm_first
    x = torch.randn(2, 6, D_MODEL)
    tokens = torch.tensor([[5, 5, 5, 5, 0, 0], [5, 5, 5, 5, 5, 5]])
    mask = padding_mask(tokens, 0)
    assert max_err(ours(x), theirs(x)) <= TOL
    ref = theirs(x, src_key_padding_mask=torch_key_padding_mask(mask))
    assert max_err(ours(x, mask), ref) <= TOL


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first):
    ours = randomise(DecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first)).eval()
    theirs = to_torch(ours)
    assert isinstance(theirs, nn.TransformerDecoderLayer)
    T, S = 5, 7
    x, memory = torch.randn(2, T, D_MODEL), torch.randn(2, S, D_MODEL)
    src = torch.tensor([[5] * 5 + [0, 0], [5] * 7])
    memory_mask = padding_mask(src, 0)
    out = ours(x, memory, causal_mask(T)[None, None], memory_mask)
    ref = theirs(x, memory, tgt_mask=torch_attn_mask(causal_mask(T)[None, None], 2, HEADS),
                 memory_key_padding_mask=torch_key_padding_mask(memory_mask))
    assert max_err(out, ref) <= TOL


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_stack_matches_torch(norm_first):
    ours = randomise(Encoder(3, D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first)).eval()
    theirs = to_torch(ours)
    assert isinstance(theirs, nn.TransformerEncoder) and len(theirs.layers) == 3
    assert (theirs.norm is None) == (not norm_first)  # post-norm: no final norm
    x = torch.randn(2, 6, D_MODEL)
    tokens = torch.tensor([[5, 5, 5, 0, 0, 0], [5, 5, 5, 5, 5, 5]])
    mask = padding_mask(tokens, 0)
    ref = theirs(x, src_key_padding_mask=torch_key_padding_mask(mask))
    assert max_err(ours(x, mask), ref) <= TOL


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_stack_matches_torch(norm_first):
    ours = randomise(Decoder(2, D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first)).eval()
    theirs = to_torch(ours)
    assert isinstance(theirs, nn.TransformerDecoder) and (theirs.norm is None) == (not norm_first)
    x, memory = torch.randn(3, 4, D_MODEL), torch.randn(3, 6, D_MODEL)
    out = ours(x, memory, causal_mask(4)[None, None])
    ref = theirs(x, memory, tgt_mask=~causal_mask(4))
    assert max_err(out, ref) <= TOL


def test_silu_layers_match_torch_with_the_same_activation():
    """activation="silu" (notebook 15's swish): the encoder and decoder stacks and torch.nn's
    with F.silu agree, and differ from the ReLU ones."""
    x, memory = torch.randn(2, 5, D_MODEL), torch.randn(2, 6, D_MODEL)
    encoder = randomise(Encoder(2, D_MODEL, HEADS, D_FF, activation="silu")).eval()
    decoder = randomise(Decoder(2, D_MODEL, HEADS, D_FF, activation="silu")).eval()
    assert to_torch(encoder).layers[0].activation is nn.functional.silu
    assert max_err(encoder(x), to_torch(encoder)(x)) <= TOL
    future = causal_mask(5)
    assert max_err(decoder(x, memory, future[None, None]),
                   to_torch(decoder)(x, memory, tgt_mask=~future)) <= TOL
    with_silu = encoder(x)
    for layer in encoder.layers:
        layer.feed_forward.activation = "relu"
    assert max_err(encoder(x), with_silu) > 1e-2
    assert max_err(encoder(x), to_torch(encoder)(x)) <= TOL  # relu on both sides now
    assert to_torch(encoder).layers[0].activation_relu_or_gelu == 1


def test_stack_layers_start_from_different_weights():
    enc = Encoder(2, D_MODEL, HEADS, D_FF)
    assert not torch.equal(enc.layers[0].self_attn.w_q.weight, enc.layers[1].self_attn.w_q.weight)


def test_to_torch_keeps_training_mode_and_train_mode_runs_dropout():
    ours = EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.5).train()
    theirs = to_torch(ours)
    assert theirs.training
    x = torch.randn(2, 4, D_MODEL)
    assert not torch.equal(theirs(x), theirs(x))  # dropout active in both
    assert not torch.equal(ours(x), ours(x))


def test_to_torch_rejects_other_modules():
    with pytest.raises(TypeError, match="to_torch converts.*Linear"):
        to_torch(nn.Linear(3, 3))


def test_zero_layers_error():
    with pytest.raises(ValueError, match="num_layers must be at least 1, got 0"):
        Encoder(0, D_MODEL, HEADS, D_FF)


def test_encoder_padding_invariance():
    """Adding padded positions changes no real position's output."""
    enc = Encoder(2, D_MODEL, HEADS, D_FF).eval()
    x = torch.randn(1, 4, D_MODEL)
    padded = torch.cat([x, torch.randn(1, 3, D_MODEL)], dim=1)
    mask = padding_mask(torch.tensor([[1, 1, 1, 1, 0, 0, 0]]), 0)
    assert max_err(enc(x), enc(padded, mask)[:, :4]) <= TOL


def test_torch_attn_mask_expands_a_padding_mask_over_queries():
    from helpers.attention import MultiHeadAttention
    ours = MultiHeadAttention(D_MODEL, HEADS).eval()
    theirs = to_torch(ours).eval()
    q, memory = torch.randn(2, 3, D_MODEL), torch.randn(2, 5, D_MODEL)
    mask = padding_mask(torch.tensor([[4, 4, 4, 0, 0], [4, 4, 4, 4, 4]]), 0)  # (B, 1, 1, Lk)
    attn_mask = torch_attn_mask(mask, 2, HEADS, query_len=3)
    assert attn_mask.shape == (2 * HEADS, 3, 5)
    ref, _ = theirs(q, memory, memory, attn_mask=attn_mask)
    assert max_err(ours(q, memory, memory, mask), ref) <= TOL


def test_to_torch_accepts_a_class_redefined_with_the_same_name():
    """A notebook defines its own LayerNorm in the open; the exit ramp still takes it."""
    class LayerNorm(nn.Module):  # noqa: N801 - same name on purpose
        def __init__(self):
            super().__init__()
            self.eps = 1e-5
            self.weight = nn.Parameter(torch.randn(6))
            self.bias = nn.Parameter(torch.randn(6))

    converted = to_torch(LayerNorm())
    assert isinstance(converted, nn.LayerNorm) and converted.weight.shape == (6,)
