"""One attention path: with a KVCache, the translator's and the GPT's logits equal those of the
whole forward (float64 to 1e-6, float32 to 1e-4), a prefill of several tokens then one token at a
time, and after a beam reorder. Rotary attention agrees with apply_rope done by hand."""

import itertools
import math

import pytest
import torch

from helpers.attention import KVCache, MultiHeadAttention, merge_heads, split_heads
from helpers.gpt import GPT_CHOICES, GPT, GPTConfig
from helpers.masks import causal_mask, padding_mask
from helpers.model import Transformer
from helpers.positional import apply_rope, rope_angles

TOLERANCE = {torch.float64: 1e-6, torch.float32: 1e-4}
PAD = 0


def translator(dtype, norm_first, tie_weights, seed=0):
    torch.manual_seed(seed)
    model = Transformer(13, 13, d_model=16, num_heads=4, num_layers=2, d_ff=32, dropout=0.1,
                        max_len=32, norm_first=norm_first, tie_weights=tie_weights)
    return model.to(dtype).eval()  # eval: dropout off, as decoding runs


def cached_decode(model, tgt, memory, src_mask, cache, prefill=3):
    """The logits of ``tgt`` through the cache: ``prefill`` tokens at once, then one by one."""
    steps = [model.decode(tgt[:, :prefill], memory, src_mask, cache=cache)]
    steps += [model.decode(tgt[:, t:t + 1], memory, src_mask, cache=cache)
              for t in range(prefill, tgt.shape[1])]
    return torch.cat(steps, dim=1)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("norm_first, tie_weights", [(False, False), (True, False),
                                                     (False, True), (True, True)])
def test_translator_cached_logits_equal_the_whole_decode(dtype, norm_first, tie_weights):
    model = translator(dtype, norm_first, tie_weights)
    src, tgt = torch.randint(3, 13, (3, 7)), torch.randint(3, 13, (3, 9))
    src[1, 5:] = PAD
    src_mask = padding_mask(src, PAD)
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        whole = model.decode(tgt, memory, src_mask)  # (B, T, V)
        cache = KVCache()
        cached = cached_decode(model, tgt, memory, src_mask, cache)
    assert cache.length == tgt.shape[1]
    assert (cached - whole).abs().max() <= TOLERANCE[dtype]
    assert whole.abs().max() > 0.1  # logits that say something


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("norm_first", [False, True])
def test_translator_cache_after_a_beam_reorder(dtype, norm_first):
    """Beam search keeps some rows of the cache, in a new order: the next logits are those of
    the chosen prefixes, decoded whole. The memory is one sentence's, expanded (a view)."""
    model = translator(dtype, norm_first, tie_weights=False, seed=1)
    src, tgt = torch.randint(3, 13, (1, 6)), torch.randint(3, 13, (4, 6))
    rows = torch.tensor([2, 0, 0, 3])
    with torch.no_grad():
        memory = model.encode(src)
        cache = KVCache()
        model.decode(tgt[:1, :1], memory, cache=cache)  # the first step: one hypothesis
        cache.reorder(torch.zeros(4, dtype=torch.long))  # four hypotheses of that prefix
        for t in range(1, 4):
            model.decode(tgt[:, t:t + 1], memory.expand(4, -1, -1), cache=cache)
        cache.reorder(rows)
        prefix = torch.cat([tgt[:1, :1].expand(4, 1), tgt[:, 1:4]], dim=1)[rows]  # (4, 4)
        new = torch.randint(3, 13, (4, 1))
        step = model.decode(new, memory.expand(4, -1, -1), cache=cache)[:, -1]
        whole = model.decode(torch.cat([prefix, new], dim=1), memory.expand(4, -1, -1))[:, -1]
    assert (step - whole).abs().max() <= TOLERANCE[dtype]


GPT_CONFIGS = [dict(zip(("norm", "ffn", "positions", "norm_first"), values, strict=True))
               for values in itertools.product(GPT_CHOICES["norm"], GPT_CHOICES["ffn"],
                                               GPT_CHOICES["positions"], (True, False))]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("choices", GPT_CONFIGS, ids=lambda c: "-".join(map(str, c.values())))
def test_gpt_cached_logits_equal_the_whole_forward(dtype, choices):
    torch.manual_seed(0)
    config = GPTConfig(d_model=16, num_heads=2, num_layers=2, d_ff=32, dropout=0.1, max_len=16,
                       **choices)
    model = GPT(20, config).to(dtype).eval()
    tokens = torch.randint(0, 20, (3, 10))
    with torch.no_grad():
        whole = model(tokens)  # (B, L, V)
        cache = KVCache()
        steps = [model(tokens[:, :4], cache=cache)]  # the prefill
        steps += [model(tokens[:, t:t + 1], cache=cache) for t in range(4, 10)]
    assert cache.length == 10
    assert (torch.cat(steps, dim=1) - whole).abs().max() <= TOLERANCE[dtype]


def test_rotary_attention_is_apply_rope_then_attention():
    torch.manual_seed(0)
    attention = MultiHeadAttention(16, 2, rope=True).double().eval()
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    mask = causal_mask(6)[None, None]
    got = attention(x, x, x, mask)
    angles = rope_angles(6, 8)
    q = apply_rope(split_heads(attention.w_q(x), 2), angles)
    k = apply_rope(split_heads(attention.w_k(x), 2), angles)
    v = split_heads(attention.w_v(x), 2)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(~mask, float("-inf"))
    want = attention.w_o(merge_heads(scores.softmax(-1) @ v))
    assert (got - want).abs().max() <= 1e-12
    plain = MultiHeadAttention(16, 2).double().eval()
    plain.load_state_dict(attention.state_dict())  # the same weights, no rotation
    assert (plain(x, x, x, mask) - got).abs().max() > 1e-3


def test_rope_false_is_the_plain_forward():
    torch.manual_seed(0)
    attention = MultiHeadAttention(16, 4).eval()
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    q = split_heads(attention.w_q(x), 4)
    k, v = split_heads(attention.w_k(memory), 4), split_heads(attention.w_v(memory), 4)
    want = attention.w_o(merge_heads((q @ k.transpose(-2, -1) / 2).softmax(-1) @ v))
    torch.testing.assert_close(attention(x, memory, memory), want)
    assert attention.attention_weights.shape == (2, 4, 5, 7)
    assert not attention.attention_weights.requires_grad  # detached in every path


def test_the_attend_hook_carries_another_attention_function():
    """``mha.attend = fn``: multi-head attention runs on fn, this instance only."""
    seen = []

    def recording(q, k, v, mask=None, dropout=None):
        seen.append(q.shape)
        return MultiHeadAttention.attend(q, k, v, mask, dropout)

    torch.manual_seed(0)
    one, other = MultiHeadAttention(8, 2), MultiHeadAttention(8, 2)
    one.attend = recording
    x = torch.randn(1, 3, 8)
    one(x, x, x)
    other(x, x, x)
    assert seen == [(1, 2, 3, 4)]
    assert set(one.state_dict()) == set(other.state_dict())  # not a weight


def test_cached_attention_weights_cover_every_key():
    torch.manual_seed(0)
    model = GPT(20, GPTConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=16)).eval()
    cache = KVCache()
    with torch.no_grad():
        model(torch.randint(0, 20, (2, 5)), cache=cache)
        model(torch.randint(0, 20, (2, 1)), cache=cache)
    weights = model.blocks[0].self_attn.attention_weights
    assert weights.shape == (2, 2, 1, 6) and not weights.requires_grad
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 1))
