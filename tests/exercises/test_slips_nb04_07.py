"""Notebooks 04-07: wrong answers written as a learner would write them, independently of the
checkers' own variants. Each must fail with the hint of its slip (a pitfall id, or a phrase of a
hint without one), never with the generic advice; right answers written differently from the
references must pass.
"""

import contextlib
import io
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers.attention import MultiHeadAttention, scaled_dot_product_attention
from helpers.exercises import check
from helpers.layers import FeedForward, LayerNorm

GENERIC = "Compare your code with the equation"


def run(name, fn):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ok = check(name, fn)
    return ok, out.getvalue()


def expect(name, fn, named):
    ok, text = run(name, fn)
    assert not ok, text
    assert GENERIC not in text, text
    assert (f"[{named}]" in text) if named[0].isupper() and named[1:].isdigit() else (
        named in text), text


# ----------------------------------------------------------------------------------------------
# 04: layer_norm
# ----------------------------------------------------------------------------------------------

def ln_var_default(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return weight * (x - mu) / torch.sqrt(x.var(-1, keepdim=True) + eps) + bias


def ln_std_default(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return weight * (x - mu) / torch.sqrt(x.std(-1, keepdim=True) ** 2 + eps) + bias


def ln_torch_var_correction(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = torch.var(x, dim=-1, keepdim=True, correction=1)
    return (x - mu) * torch.rsqrt(var + eps) * weight + bias


def ln_eps_outside(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    sd = ((x - mu) ** 2).mean(-1, keepdim=True).sqrt()
    return weight * (x - mu) / (sd + eps) + bias


def ln_no_eps(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return weight * (x - mu) / ((x - mu) ** 2).mean(-1, keepdim=True).sqrt() + bias


def ln_tutorial(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    std = x.std(-1, keepdim=True)
    return weight * (x - mean) / (std + eps) + bias


def ln_scalar(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, unbiased=False)
    return weight.mean() * (x - mu) / torch.sqrt(var + eps) + bias.mean()


def ln_dim_one(x, weight, bias, eps=1e-5):
    mu = x.mean(1, keepdim=True)
    var = ((x - mu) ** 2).mean(1, keepdim=True)
    return weight * (x - mu) / torch.sqrt(var + eps) + bias


def ln_dim_zero(x, weight, bias, eps=1e-5):
    mu = x.mean(0, keepdim=True)
    var = ((x - mu) ** 2).mean(0, keepdim=True)
    return weight * (x - mu) / torch.sqrt(var + eps) + bias


def ln_everything(x, weight, bias, eps=1e-5):
    return weight * (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + eps) + bias


def ln_minus_eps(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return weight * (x - mu) / torch.sqrt(var - eps) + bias


def ln_no_sqrt(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return weight * (x - mu) / (var + eps) + bias


def ln_swapped(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return bias * (x - mu) / torch.sqrt(var + eps) + weight


def ln_bias_first(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return ((x - mu) / torch.sqrt(var + eps) + bias) * weight


def ln_not_centred(x, weight, bias, eps=1e-5):
    var = x.var(-1, keepdim=True, unbiased=False)
    return weight * x / torch.sqrt(var + eps) + bias


def ln_mean_square(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return weight * (x - mu) / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) + bias


def ln_no_keepdim(x, weight, bias, eps=1e-5):
    mu = x.mean(-1)
    var = x.var(-1, unbiased=False)
    return weight * (x - mu) / torch.sqrt(var + eps) + bias


def ln_fixed_eps(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, unbiased=False)
    return weight * (x - mu) / torch.sqrt(var + 1e-5) + bias


def ln_functional(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def ln_module(x, weight, bias, eps=1e-5):
    norm = nn.LayerNorm(x.shape[-1], eps=eps)
    with torch.no_grad():
        norm.weight.copy_(weight)
        norm.bias.copy_(bias)
        return norm(x)


LAYER_NORM_SLIPS = [
    (ln_var_default, "N1"), (ln_std_default, "N1"), (ln_torch_var_correction, "N1"),
    (ln_eps_outside, "N2"), (ln_no_eps, "N2"), (ln_tutorial, "N2"), (ln_scalar, "N3"),
    (ln_dim_one, "N4"), (ln_dim_zero, "N4"), (ln_everything, "N4"), (ln_minus_eps, "N5"),
    (ln_no_sqrt, "N6"), (ln_swapped, "N7"), (ln_bias_first, "N7"), (ln_not_centred, "N8"),
    (ln_mean_square, "N8"), (ln_no_keepdim, "keepdim"), (ln_fixed_eps, "eps argument"),
    (ln_functional, "switched off"), (ln_module, "switched off"),
]


def ln_by_hand_sums(x, weight, bias, eps=1e-5):
    d = x.shape[-1]
    mu = x.sum(-1, keepdim=True) / d
    var = ((x - mu) ** 2).sum(-1, keepdim=True) / d
    return (x - mu) * (var + eps) ** -0.5 * weight + bias


def ln_var_mean(x, weight, bias, eps=1e-5):
    var, mu = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    return torch.addcmul(bias, (x - mu) / torch.sqrt(var + eps), weight)


# ----------------------------------------------------------------------------------------------
# 04: feed_forward
# ----------------------------------------------------------------------------------------------

FEED_FORWARD_SLIPS = [
    (lambda x, w1, b1, w2, b2: (x @ w1 + b1) @ w2 + b2, "apply ReLU between"),
    (lambda x, w1, b1, w2, b2: F.relu(F.relu(x @ w1 + b1) @ w2 + b2), "no ReLU after"),
    (lambda x, w1, b1, w2, b2: F.relu(x @ w1.T + b1) @ w2.T + b2, "check the shapes"),
    (lambda x, w1, b1, w2, b2: F.linear(F.relu(F.linear(x, w1, b1)), w2, b2), "check the shapes"),
    (lambda x, w1, b1, w2, b2: torch.relu(x @ w1) @ w2 + b2, "first bias"),
    (lambda x, w1, b1, w2, b2: torch.relu(x @ w1 + b1) @ w2, "second bias"),
    (lambda x, w1, b1, w2, b2: (torch.relu(x @ w1) + b1) @ w2 + b2, "before the ReLU"),
    (lambda x, w1, b1, w2, b2: torch.relu(x @ w2 + b1) @ w1 + b2, "comes first"),
    (lambda x, w1, b1, w2, b2: F.gelu(x @ w1 + b1) @ w2 + b2, "not GELU"),
    (lambda x, w1, b1, w2, b2: (F.relu(x) @ w1 + b1) @ w2 + b2, "not on the input"),
]

FEED_FORWARD_RIGHT = [
    lambda x, w1, b1, w2, b2: torch.clamp(x @ w1 + b1, min=0) @ w2 + b2,
    lambda x, w1, b1, w2, b2: F.linear(F.relu(F.linear(x, w1.T, b1)), w2.T, b2),
    lambda x, w1, b1, w2, b2: torch.maximum(torch.einsum("bld,df->blf", x, w1) + b1,
                                            torch.zeros(())) @ w2 + b2,
]


# ----------------------------------------------------------------------------------------------
# 04: residual_sublayer
# ----------------------------------------------------------------------------------------------

def rs(post, pre):
    return lambda x, sublayer, norm, norm_first: pre(x, sublayer, norm) if norm_first else post(
        x, sublayer, norm)


POST = lambda x, f, n: n(x + f(x))  # noqa: E731
PRE = lambda x, f, n: x + f(n(x))  # noqa: E731
RESIDUAL_SLIPS = [
    (rs(PRE, POST), "swapped"),
    (lambda x, f, n, norm_first: n(x + f(x)), "norm_first is ignored"),
    (lambda x, f, n, norm_first: x + f(n(x)), "norm_first is ignored"),
    (rs(lambda x, f, n: n(f(x)), lambda x, f, n: f(n(x))), "add the input x back"),
    (rs(lambda x, f, n: n(f(x)) + x, PRE), "residual is added after the norm"),
    (rs(POST, lambda x, f, n: n(x) + f(n(x))), "carries x itself, not norm(x)"),
    (rs(POST, lambda x, f, n: n(x + f(n(x)))), "leaves the sum un-normalised"),
    (rs(lambda x, f, n: n(x) + f(x), PRE), "not the input"),
    (rs(POST, lambda x, f, n: x + n(f(x))), "L3"),
    (rs(POST, lambda x, f, n: f(x) + f(n(x))), "untouched"),
]


# ----------------------------------------------------------------------------------------------
# 05: embed_tokens
# ----------------------------------------------------------------------------------------------

EMBED_SLIPS = [
    (lambda t, w, pe: w[t] + pe[:t.shape[1]], "T2"),
    (lambda t, w, pe: F.embedding(t, w) + pe[:t.size(1)], "T2"),
    (lambda t, w, pe: (w[t] + pe[:t.shape[1]]) * w.shape[1] ** 0.5, "T2"),
    (lambda t, w, pe: w[t] * w.shape[-1] + pe[:t.shape[1]], "not d_model"),
    (lambda t, w, pe: w[t] / math.sqrt(w.shape[1]) + pe[:t.shape[1]], "do not divide"),
    (lambda t, w, pe: w[t] * math.sqrt(len(w)) + pe[:t.shape[1]], "vocabulary size"),
    (lambda t, w, pe: w[t] * math.sqrt(w.shape[1]) + pe[:, :t.shape[1]], "P4"),
    (lambda t, w, pe: w[t] * math.sqrt(w.shape[1]) + pe, "E1"),
    (lambda t, w, pe: w[t] * math.sqrt(w.shape[1]) + pe[:len(t)], "E1"),
    (lambda t, w, pe: w[t] * math.sqrt(w.shape[1]) + pe[t], "E2"),
    (lambda t, w, pe: w[t] * math.sqrt(pe.shape[0]) + pe[:t.shape[1]], "max_len"),
    (lambda t, w, pe: w[t] * math.sqrt(t.shape[1]) + pe[:t.shape[1]], "sentence length"),
]

EMBED_RIGHT = [
    lambda t, w, pe: F.embedding(t, w) * w.size(-1) ** 0.5 + pe[None, :t.size(-1)],
    lambda t, w, pe: torch.stack([w[row] * math.sqrt(w.shape[1]) + pe[:len(row)] for row in t]),
    lambda t, w, pe: F.one_hot(t, w.shape[0]).to(w.dtype) @ (w * math.sqrt(w.shape[1]))
    + pe[:t.shape[1]],
]


# ----------------------------------------------------------------------------------------------
# 05: encoder_layer (the learner's forward on the notebook's __init__)
# ----------------------------------------------------------------------------------------------

class Given(nn.Module):
    """The __init__ notebook 05 gives."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)


def encoder(forward):
    return type("MyEncoderLayer", (Given,), {"forward": forward})


def enc_always_pre(self, x, mask=None):
    h = self.norm1(x)
    x = x + self.dropout1(self.self_attn(h, h, h, mask))
    return x + self.dropout2(self.feed_forward(self.norm2(x)))


def enc_always_post(self, x, mask=None):
    x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
    return self.norm2(x + self.dropout2(self.feed_forward(x)))


def enc_layout(post, pre):
    return lambda self, x, mask=None: pre(self, x, mask) if self.norm_first else post(self, x,
                                                                                      mask)


def enc_inverted_layout(self, x, mask=None):
    return enc_always_post(self, x, mask) if self.norm_first else enc_always_pre(self, x, mask)


def enc_post_no_attn_residual(self, x, mask=None):
    x = self.norm1(self.dropout1(self.self_attn(x, x, x, mask)))
    return self.norm2(x + self.dropout2(self.feed_forward(x)))


def enc_post_no_ff_residual(self, x, mask=None):
    x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
    return self.norm2(self.dropout2(self.feed_forward(x)))


def enc_post_l3(self, x, mask=None):
    x = x + self.norm1(self.dropout1(self.self_attn(x, x, x, mask)))
    return x + self.norm2(self.dropout2(self.feed_forward(x)))


def enc_post_no_mask(self, x, mask=None):
    return enc_always_post(self, x, None)


def enc_pre_no_mask(self, x, mask=None):
    return enc_always_pre(self, x, None)


def enc_post_inverted_mask(self, x, mask=None):
    return enc_always_post(self, x, None if mask is None else ~mask)


def enc_post_ff_first(self, x, mask=None):
    x = self.norm1(x + self.dropout1(self.feed_forward(x)))
    return self.norm2(x + self.dropout2(self.self_attn(x, x, x, mask)))


def enc_post_norms_swapped(self, x, mask=None):
    x = self.norm2(x + self.dropout1(self.self_attn(x, x, x, mask)))
    return self.norm1(x + self.dropout2(self.feed_forward(x)))


def enc_pre_query_only(self, x, mask=None):
    x = x + self.dropout1(self.self_attn(self.norm1(x), x, x, mask))
    return x + self.dropout2(self.feed_forward(self.norm2(x)))


def enc_post_attention_only(self, x, mask=None):
    return self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))


ENCODER_SLIPS = [
    (enc_always_pre, "L1"), (enc_always_post, "L1"), (enc_inverted_layout, "L1"),
    (enc_layout(enc_post_no_attn_residual, enc_always_pre), "L2"),
    (enc_layout(enc_post_no_ff_residual, enc_always_pre), "L2"),
    (enc_layout(enc_post_l3, enc_always_pre), "L3"),
    (enc_layout(enc_post_no_mask, enc_pre_no_mask), "D4"),
    (enc_layout(enc_post_inverted_mask, enc_always_pre), "A3"),
    (enc_layout(enc_post_ff_first, enc_always_pre), "L5"),
    (enc_layout(enc_post_norms_swapped, enc_always_pre), "L6"),
    (enc_layout(enc_always_post, enc_pre_query_only), "whole input of the sub-layer"),
    (enc_layout(enc_post_attention_only, enc_always_pre), "two sub-layers"),
]


def enc_right_written_out(self, x, mask=None):
    if self.norm_first:
        n = self.norm1(x)
        a = self.self_attn(query=n, key=n, value=n, mask=mask)
        x = x + self.dropout1(a)
        return x + self.dropout2(self.feed_forward(self.norm2(x)))
    a = self.dropout1(self.self_attn(x, x, x, mask))
    h = self.norm1(a + x)
    return self.norm2(self.dropout2(self.feed_forward(h)) + h)


# ----------------------------------------------------------------------------------------------
# 06: causal_mask and padding_mask
# ----------------------------------------------------------------------------------------------

def arange_mask(op):
    return lambda size: op(torch.arange(size)[None, :], torch.arange(size)[:, None])


CAUSAL_SLIPS = [
    (lambda size: torch.triu(torch.ones(size, size, dtype=torch.bool)), "M1"),
    (arange_mask(lambda s, t: s >= t), "M1"),
    (lambda size: torch.ones(size, size, dtype=torch.bool).triu(1), "M1"),
    (arange_mask(lambda s, t: s > t), "M1"),
    (lambda size: torch.tril(torch.ones(size, size, dtype=torch.bool), diagonal=-1), "M2"),
    (arange_mask(lambda s, t: s < t), "M2"),
    (lambda size: torch.tril(torch.ones(size, size)), "bool tensor"),
    (lambda size: torch.ones(size, size, dtype=torch.int64).tril(), "bool tensor"),
    (lambda size: torch.tril(torch.ones(size, size, dtype=torch.bool))[None, None],
     "causal_mask(L)[None, None]"),
    (lambda size: torch.ones(size, size, dtype=torch.bool), "M1"),
]

CAUSAL_RIGHT = [
    arange_mask(lambda s, t: s <= t),
    lambda size: ~torch.ones(size, size, dtype=torch.bool).triu(1),
    lambda size: torch.tril(torch.ones(size, size)).bool(),
    lambda size: torch.tensor([[s <= t for s in range(size)] for t in range(size)]),
]

PADDING_SLIPS = [
    (lambda tokens, pad_id: (tokens != pad_id).unsqueeze(-1).unsqueeze(1), "M3"),
    (lambda tokens, pad_id: tokens != pad_id, "M3"),
    (lambda tokens, pad_id: (tokens != pad_id).unsqueeze(1), "M3"),
    (lambda tokens, pad_id: (tokens != pad_id)[None, None], "M3"),
    (lambda tokens, pad_id: (tokens == pad_id)[:, None, None, :], "M4"),
    (lambda tokens, pad_id: tokens.eq(pad_id).view(tokens.shape[0], 1, 1, -1), "M4"),
    (lambda tokens, pad_id: (tokens > pad_id)[:, None, None], "M6"),
    (lambda tokens, pad_id: (tokens != 0)[:, None, None, :], "M6"),
    (lambda tokens, pad_id: tokens.ne(pad_id).float()[:, None, None, :], "bool tensor"),
    (lambda tokens, pad_id: (tokens != pad_id)[:, None, None, :].expand(
        -1, -1, tokens.shape[1], -1), "query axis of size 1"),
]

PADDING_RIGHT = [
    lambda tokens, pad_id: tokens.ne(pad_id).unsqueeze(1).unsqueeze(2),
    lambda tokens, pad_id: (tokens != pad_id).reshape(tokens.shape[0], 1, 1, tokens.shape[1]),
    lambda tokens, pad_id: ~(tokens == pad_id)[:, None, None, :],
]


# ----------------------------------------------------------------------------------------------
# 07: shift_right
# ----------------------------------------------------------------------------------------------

SHIFT_SLIPS = [
    (lambda target, bos_id: target, "T1"),
    (lambda target, bos_id: torch.cat([target[:, 1:], torch.full_like(target[:, :1], bos_id)], 1),
     "shift right, not left"),
    (lambda target, bos_id: torch.cat([torch.full_like(target[:, :1], bos_id), target[:, 1:]], 1),
     "drop the last target token, not the first"),
    (lambda target, bos_id: torch.cat([torch.full_like(target[:, :1], bos_id), target], 1),
     "keep the length T"),
    (lambda target, bos_id: target.roll(1, dims=1), "wraps the last token"),
    (lambda target, bos_id: torch.cat([torch.full_like(target[:, :1], 1), target[:, :-1]], 1),
     "T11"),
    (lambda target, bos_id: target[:, :-1], "T12"),
    (lambda target, bos_id: torch.cat([bos_id * torch.ones(len(target), 1), target[:, :-1]], 1),
     "T13"),
    (lambda target, bos_id: torch.cat([target[:, :-1], torch.full_like(target[:, :1], bos_id)], 1),
     "T14"),
    (lambda target, bos_id: torch.stack([torch.cat([torch.tensor([bos_id]), row]) for row in
                                         target]), "keep the length T"),
]


def shift_bos_over_first(target, bos_id):
    out = target.clone()
    out[:, 0] = bos_id
    return out


SHIFT_SLIPS.append((shift_bos_over_first, "drop the last target token"))  # = BOS + y_1...
SHIFT_SLIPS[8] = (lambda target, bos_id: target.index_fill(1, torch.tensor([target.shape[1] - 1]),
                                                           bos_id), "T14")


def shift_in_place(target, bos_id):
    out = target.roll(1, 1)
    out[:, 0] = bos_id
    return out


SHIFT_RIGHT = [
    shift_in_place,
    lambda target, bos_id: F.pad(target[:, :-1], (1, 0), value=bos_id),
    lambda target, bos_id: torch.hstack([torch.full((target.shape[0], 1), bos_id,
                                                    dtype=target.dtype), target[:, :-1]]),
]


# ----------------------------------------------------------------------------------------------
# 07: cross_attention
# ----------------------------------------------------------------------------------------------

def by_hand(q_from, k_from, v_from, scale=True, mask_mode="before", transposed=False):
    def cross(x, memory, w_q, w_k, w_v, memory_mask=None):
        src = {"x": x, "m": memory}
        t = (lambda w: w.T) if transposed else (lambda w: w)
        q, k, v = src[q_from] @ t(w_q), src[k_from] @ t(w_k), src[v_from] @ t(w_v)
        scores = q @ k.transpose(1, 2)
        if scale:
            scores = scores / math.sqrt(k.shape[-1])
        if memory_mask is not None and mask_mode == "before":
            scores = scores.masked_fill(~memory_mask, float("-inf"))
        if memory_mask is not None and mask_mode == "inverted":
            scores = scores.masked_fill(memory_mask, float("-inf"))
        weights = scores.softmax(-1)
        if memory_mask is not None and mask_mode == "after":
            weights = weights.masked_fill(~memory_mask, 0.0)
        return weights @ v, weights
    return cross


def cross_causal(x, memory, w_q, w_k, w_v, memory_mask=None):
    mask = torch.ones(x.shape[1], memory.shape[1], dtype=torch.bool).tril()
    if memory_mask is not None:
        mask = mask & memory_mask
    return scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ w_v, mask)


def cross_d_model(x, memory, w_q, w_k, w_v, memory_mask=None):
    q, k, v = x @ w_q, memory @ w_k, memory @ w_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])
    if memory_mask is not None:
        scores = scores.masked_fill(~memory_mask, -1e9)
    weights = scores.softmax(-1)
    return weights @ v, weights


CROSS_SLIPS = [
    (by_hand("m", "x", "x"), "arguments are swapped"),
    (by_hand("x", "m", "x"), "values come from the memory"),
    (by_hand("x", "x", "x"), "that is self-attention"),
    (lambda x, m, wq, wk, wv, memory_mask=None: scaled_dot_product_attention(
        x @ wq, m @ wk, m @ wv), "pass memory_mask"),
    (cross_causal, "belongs to the decoder's self-attention"),
    (by_hand("x", "m", "m", mask_mode="inverted"), "A3"),
    (cross_d_model, "A1"),
    (by_hand("x", "x", "m"), "keys come from the memory"),
    (by_hand("x", "m", "m", transposed=True), "no .T"),
    (by_hand("x", "m", "m", scale=False), "divide the scores by sqrt(d_k)"),
    (by_hand("x", "m", "m", mask_mode="after"), "A2"),
]

CROSS_RIGHT = [
    by_hand("x", "m", "m"),
    lambda x, m, wq, wk, wv, memory_mask=None: scaled_dot_product_attention(
        torch.einsum("btd,dk->btk", x, wq), m @ wk, m @ wv, memory_mask),
]


# ----------------------------------------------------------------------------------------------
# 07: decoder_layer
# ----------------------------------------------------------------------------------------------

class GivenDecoder(nn.Module):
    """The __init__ notebook 07 gives."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (LayerNorm(d_model) for _ in range(3))
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(3))


def decoder(post, pre=None):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            return (pre or dec_pre)(self, x, memory, tgt_mask, memory_mask)
        return post(self, x, memory, tgt_mask, memory_mask)
    return type("MyDecoderLayer", (GivenDecoder,), {"forward": forward})


def dec_post(self, x, memory, tgt_mask=None, memory_mask=None):
    x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
    x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
    return self.norm3(x + self.dropout3(self.feed_forward(x)))


def dec_pre(self, x, memory, tgt_mask=None, memory_mask=None):
    n = self.norm1(x)
    x = x + self.dropout1(self.self_attn(n, n, n, tgt_mask))
    x = x + self.dropout2(self.cross_attn(self.norm2(x), memory, memory, memory_mask))
    return x + self.dropout3(self.feed_forward(self.norm3(x)))


def dec_post_no_tgt_mask(self, x, memory, tgt_mask=None, memory_mask=None):
    return dec_post(self, x, memory, None, memory_mask)


def dec_pre_no_tgt_mask(self, x, memory, tgt_mask=None, memory_mask=None):
    return dec_pre(self, x, memory, None, memory_mask)


def dec_post_swapped(self, x, memory, tgt_mask=None, memory_mask=None):
    x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
    x = self.norm2(x + self.dropout2(self.cross_attn(memory, x, x, memory_mask)))
    return self.norm3(x + self.dropout3(self.feed_forward(x)))


def dec_post_queries_from_x(self, x, memory, tgt_mask=None, memory_mask=None):
    h1 = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
    h2 = self.norm2(h1 + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
    return self.norm3(h2 + self.dropout3(self.feed_forward(h2)))


def dec_post_queries_from_x_residual_x(self, x, memory, tgt_mask=None, memory_mask=None):
    h1 = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
    h2 = self.norm2(h1 + self.cross_attn(x, memory, memory, memory_mask))
    return self.norm3(h2 + self.feed_forward(h2))


def dec_pre_queries_from_x(self, x, memory, tgt_mask=None, memory_mask=None):
    n = self.norm1(x)
    h1 = x + self.dropout1(self.self_attn(n, n, n, tgt_mask))
    h2 = h1 + self.dropout2(self.cross_attn(self.norm2(x), memory, memory, memory_mask))
    return h2 + self.dropout3(self.feed_forward(self.norm3(h2)))


def dec_post_no_cross_residual(self, x, memory, tgt_mask=None, memory_mask=None):
    x = self.norm1(x + self.self_attn(x, x, x, tgt_mask))
    x = self.norm2(self.cross_attn(x, memory, memory, memory_mask))
    return self.norm3(x + self.feed_forward(x))


def dec_post_no_self_residual(self, x, memory, tgt_mask=None, memory_mask=None):
    x = self.norm1(self.self_attn(x, x, x, tgt_mask))
    x = self.norm2(x + self.cross_attn(x, memory, memory, memory_mask))
    return self.norm3(x + self.feed_forward(x))


def dec_post_no_ff_residual(self, x, memory, tgt_mask=None, memory_mask=None):
    x = self.norm1(x + self.self_attn(x, x, x, tgt_mask))
    x = self.norm2(x + self.cross_attn(x, memory, memory, memory_mask))
    return self.norm3(self.feed_forward(x))


def dec_post_no_memory_mask(self, x, memory, tgt_mask=None, memory_mask=None):
    return dec_post(self, x, memory, tgt_mask, None)


def dec_pre_no_memory_mask(self, x, memory, tgt_mask=None, memory_mask=None):
    return dec_pre(self, x, memory, tgt_mask, None)


def dec_post_masks_swapped(self, x, memory, tgt_mask=None, memory_mask=None):
    return dec_post(self, x, memory, memory_mask, tgt_mask)


def dec_pre_masks_swapped(self, x, memory, tgt_mask=None, memory_mask=None):
    return dec_pre(self, x, memory, memory_mask, tgt_mask)


def dec_post_cross_first(self, x, memory, tgt_mask=None, memory_mask=None):
    x = self.norm1(x + self.cross_attn(x, memory, memory, memory_mask))
    x = self.norm2(x + self.self_attn(x, x, x, tgt_mask))
    return self.norm3(x + self.feed_forward(x))


def dec_post_norms_12(self, x, memory, tgt_mask=None, memory_mask=None):
    x = self.norm2(x + self.self_attn(x, x, x, tgt_mask))
    x = self.norm1(x + self.cross_attn(x, memory, memory, memory_mask))
    return self.norm3(x + self.feed_forward(x))


def dec_pre_memory_normed(self, x, memory, tgt_mask=None, memory_mask=None):
    n = self.norm1(x)
    x = x + self.self_attn(n, n, n, tgt_mask)
    m = self.norm2(memory)
    x = x + self.cross_attn(self.norm2(x), m, m, memory_mask)
    return x + self.feed_forward(self.norm3(x))


DECODER_SLIPS = [
    (decoder(dec_post_no_tgt_mask, dec_pre_no_tgt_mask), "M5"),
    (decoder(dec_post_swapped), "L4"),
    (decoder(dec_post_queries_from_x, dec_pre_queries_from_x), "L7"),
    (decoder(dec_post_queries_from_x_residual_x, dec_pre_queries_from_x), "L7"),
    (decoder(dec_post_queries_from_x), "L7"),
    (decoder(dec_post_no_cross_residual), "L2"),
    (decoder(dec_post_no_self_residual), "L2"),
    (decoder(dec_post_no_ff_residual), "L2"),
    (decoder(dec_pre, dec_post), "L1"),
    (decoder(dec_post, dec_post), "L1"),
    (decoder(dec_pre, dec_pre), "L1"),
    (decoder(dec_post_no_memory_mask, dec_pre_no_memory_mask), "D4"),
    (decoder(dec_post_masks_swapped, dec_pre_masks_swapped), "L8"),
    (decoder(dec_post_cross_first), "L5"),
    (decoder(dec_post_norms_12), "L6"),
    (decoder(dec_post, dec_pre_memory_normed), "as it is"),
]


def dec_right_names(self, x, memory, tgt_mask=None, memory_mask=None):
    if self.norm_first:
        h = self.norm1(x)
        x = x + self.dropout1(self.self_attn(query=h, key=h, value=h, mask=tgt_mask))
        h = self.norm2(x)
        x = x + self.dropout2(self.cross_attn(query=h, key=memory, value=memory, mask=memory_mask))
        h = self.norm3(x)
        return x + self.dropout3(self.feed_forward(h))
    h1 = self.norm1(self.dropout1(self.self_attn(x, x, x, tgt_mask)) + x)
    h2 = self.norm2(self.dropout2(self.cross_attn(h1, memory, memory, memory_mask)) + h1)
    return self.norm3(self.dropout3(self.feed_forward(h2)) + h2)


# ----------------------------------------------------------------------------------------------
# The tests
# ----------------------------------------------------------------------------------------------

SLIPS = ([("layer_norm", fn, named) for fn, named in LAYER_NORM_SLIPS]
         + [("feed_forward", fn, named) for fn, named in FEED_FORWARD_SLIPS]
         + [("residual_sublayer", fn, named) for fn, named in RESIDUAL_SLIPS]
         + [("embed_tokens", fn, named) for fn, named in EMBED_SLIPS]
         + [("encoder_layer", encoder(fn), named) for fn, named in ENCODER_SLIPS]
         + [("causal_mask", fn, named) for fn, named in CAUSAL_SLIPS]
         + [("padding_mask", fn, named) for fn, named in PADDING_SLIPS]
         + [("shift_right", fn, named) for fn, named in SHIFT_SLIPS]
         + [("cross_attention", fn, named) for fn, named in CROSS_SLIPS]
         + [("decoder_layer", cls, named) for cls, named in DECODER_SLIPS])

RIGHT = ([("layer_norm", fn) for fn in (ln_by_hand_sums, ln_var_mean)]
         + [("feed_forward", fn) for fn in FEED_FORWARD_RIGHT]
         + [("residual_sublayer", rs(POST, PRE))]
         + [("embed_tokens", fn) for fn in EMBED_RIGHT]
         + [("encoder_layer", encoder(enc_right_written_out))]
         + [("causal_mask", fn) for fn in CAUSAL_RIGHT]
         + [("padding_mask", fn) for fn in PADDING_RIGHT]
         + [("shift_right", fn) for fn in SHIFT_RIGHT]
         + [("cross_attention", fn) for fn in CROSS_RIGHT]
         + [("decoder_layer", decoder(dec_post, dec_pre)),
            ("decoder_layer", type("MyDecoderLayer", (GivenDecoder,),
                                   {"forward": dec_right_names}))])


@pytest.mark.parametrize("name, fn, named", SLIPS,
                         ids=[f"{name}-{i}" for i, (name, _, _) in enumerate(SLIPS)])
def test_a_learners_slip_is_named(name, fn, named):
    expect(name, fn, named)


@pytest.mark.parametrize("name, fn", RIGHT, ids=[f"{name}-{i}" for i, (name, _) in
                                                  enumerate(RIGHT)])
def test_a_right_answer_written_differently_passes(name, fn):
    ok, text = run(name, fn)
    assert ok, text


def test_every_exercise_of_notebooks_04_to_07_has_many_slips():
    counts = {}
    for name, _, _ in SLIPS:
        counts[name] = counts.get(name, 0) + 1
    assert len(counts) == 10 and min(counts.values()) >= 10, counts
