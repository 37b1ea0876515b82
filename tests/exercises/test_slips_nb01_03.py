"""Plausible wrong answers to the exercises of notebooks 01-03, written as a learner would write
them (not the registry's variants): ``check`` must refuse each one and name it (its pitfall id,
or a piece of its specific hint), never with the generic advice. Correct answers written
differently from the references must pass."""

import math

import pytest
import torch
from torch import nn

from helpers.attention import MultiHeadAttention, merge_heads, split_heads
from helpers.exercises.nb01 import masked_softmax

GENERIC = "Compare your code with the equation"
MIN = torch.finfo(torch.float32).min


def _min(t):
    return torch.finfo(t.dtype).min


# ------------------------------------------------------------------ 01: masked_softmax
def ms_after(s, m):
    return torch.softmax(s, -1) * m


def ms_after_inf(s, m):
    w = torch.softmax(s, dim=-1)
    w[~m.expand_as(w)] = float("-inf")
    return w


def ms_inverted(s, m):
    return s.masked_fill(m, _min(s)).softmax(-1).masked_fill(m, 0)


def ms_dim_minus2(s, m):
    return s.masked_fill(~m, _min(s)).softmax(dim=-2).masked_fill(~m, 0)


def ms_dim1(s, m):
    return torch.where(m, s, _min(s)).softmax(1).masked_fill(~m, 0)


def ms_dim2(s, m):
    return torch.where(m, s, _min(s)).softmax(2) * m


def ms_nan(s, m):
    return torch.where(m, s, torch.tensor(float("-inf"))).softmax(-1)


def ms_uniform(s, m):
    return s.masked_fill(m == 0, -1e9).softmax(-1)


def ms_uniform_finfo(s, m):
    return s.masked_fill(~m, _min(s)).softmax(-1)  # forgot to zero the blocked row


def ms_times_mask(s, m):
    return torch.softmax(s * m, -1) * m


def ms_zero_fill(s, m):
    return torch.softmax(s.masked_fill(~m, 0.0), -1).masked_fill(~m, 0.0)


def ms_renormalised(s, m):
    w = s.softmax(-1) * m
    return w / w.sum(-1, keepdim=True)


def ms_index(s, m):
    s = s.clone()
    s[~m] = _min(s)
    w = s.softmax(-1)
    w[~m] = 0
    return w


def ms_minus_1e9(s, m):
    return s.masked_fill(~m, -1e9).softmax(-1) * m


def ms_minus_1e9_where(s, m):
    w = torch.softmax(s.masked_fill(~m, -1e9), dim=-1)
    return torch.where(m, w, torch.zeros_like(w))


MASKED_SOFTMAX_SLIPS = [
    (ms_after, "[A2]"), (ms_after_inf, "[A2]"), (ms_inverted, "[A3]"), (ms_dim_minus2, "[A4]"),
    (ms_dim1, "[A4]"), (ms_dim2, "[A4]"), (ms_nan, "[A5]"), (ms_uniform, "[A5]"),
    (ms_uniform_finfo, "[A5]"), (ms_times_mask, "e^0 = 1"), (ms_zero_fill, "e^0 = 1"),
    (ms_renormalised, "renormalised"), (ms_index, "exact shape"),
    (ms_minus_1e9, "does not fit in float16"), (ms_minus_1e9_where, "does not fit in float16"),
]


def ms_ok_inf_then_zero(s, m):  # -inf, then the NaN rows replaced: right values, right grads
    return s.masked_fill(~m, float("-inf")).softmax(-1).nan_to_num(0.0)


def ms_ok_where(s, m):
    w = torch.where(m, s, torch.full_like(s, _min(s))).softmax(dim=-1)
    return torch.where(m, w, 0.0)


def ms_ok_any(s, m):
    w = s.masked_fill(~m, -1e4).softmax(-1)  # -1e4 fits in float16
    return w * m.any(-1, keepdim=True) * m


# ------------------------------------------------------------------ 01: attention
def _attn(scale=lambda q, k, v: math.sqrt(q.shape[-1]), t=lambda k: k.transpose(-2, -1),
          softmax=masked_softmax, order="ow", use_mask=True, scale_weights=False):
    def attention(query, key, value, mask=None):
        scores = query @ t(key)
        if not scale_weights:
            scores = scores / scale(query, key, value)
        if mask is not None and use_mask:
            w = softmax(scores, mask)
        else:
            w = scores.softmax(-1)
        if scale_weights:
            w = w / math.sqrt(query.shape[-1])
        out = w @ value
        return (out, w) if order == "ow" else (w, out)

    return attention


ATTENTION_SLIPS = [
    (_attn(scale=lambda q, k, v: 1), "[A1]"),
    (_attn(scale=lambda q, k, v: q.size(-1)), "[A1]"),
    (_attn(scale=lambda q, k, v: 1 / math.sqrt(k.shape[-1])), "[A1]"),
    (_attn(scale=lambda q, k, v: math.sqrt(v.shape[-1])), "[A1]"),
    (_attn(scale=lambda q, k, v: k.shape[-2] ** 0.5), "[A1]"),
    (_attn(scale_weights=True), "before the softmax"),
    (_attn(t=lambda k: k.transpose(1, 2)), "transpose(1, 2)"),
    (_attn(t=lambda k: k.T), "key.T"),
    (_attn(order="wo"), "(output, weights)"),
    (_attn(use_mask=False), "use the mask"),
    (_attn(softmax=ms_after), "[A2]"),
    (_attn(softmax=ms_inverted), "[A3]"),
    (_attn(softmax=ms_dim_minus2), "[A4]"),
    (_attn(softmax=ms_dim1), "[A4]"),
    (_attn(softmax=ms_nan), "[A5]"),
    (_attn(softmax=ms_uniform), "[A5]"),
    (_attn(softmax=ms_times_mask), "e^0 = 1"),
    (_attn(softmax=ms_renormalised), "renormalised"),
]


def attn_ok_einsum(query, key, value, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", query, key) * query.shape[-1] ** -0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = scores.softmax(-1).nan_to_num(0.0)
    return w @ value, w


def attn_ok_mT(query, key, value, mask=None):
    scores = (query / math.sqrt(query.size(-1))) @ key.mT
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    return masked_softmax(scores, mask) @ value, masked_softmax(scores, mask)


# ------------------------------------------------------------------ 02
def _table(max_len, d_model, base, exponent, positions=None, even=torch.sin, odd=torch.cos):
    p = torch.arange(max_len, dtype=torch.float64)[:, None] if positions is None else positions
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        angle = p[:, 0] / base ** exponent(i, d_model)
        pe[:, 2 * i], pe[:, 2 * i + 1] = even(angle), odd(angle)
    return pe.float()


def pe_loop_doubled(max_len, d_model, base=10000.0):
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            pe[pos, i] = math.sin(pos / base ** (2 * i / d_model))
            pe[pos, i + 1] = math.cos(pos / base ** (2 * i / d_model))
    return pe


def pe_halves(max_len, d_model, base=10000.0):
    p = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    w = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cat([torch.sin(p * w), torch.cos(p * w)], -1).float()


SINUSOIDAL_SLIPS = [
    (pe_loop_doubled, "[P1]"),
    (pe_halves, "[P2]"),
    (lambda n, d, base=10000.0: _table(n, d, base, lambda i, d: 2 * (i + 1) / d), "[P3]"),
    (lambda n, d, base=10000.0: _table(n, d, base, lambda i, d: 2 * i / d, even=torch.cos,
                                       odd=torch.sin), "[P5]"),
    (lambda n, d, base=10000.0: _table(n, d, base, lambda i, d: i / d), "not the pair index"),
    (lambda n, d, base=10000.0: _table(n, d, base, lambda i, d: -2 * i / d), "do not multiply"),
    (lambda n, d, base=10000.0: _table(n, d, 10000.0, lambda i, d: 2 * i / d), "base argument"),
    (lambda n, d, base=10000.0: _table(n, d, base, lambda i, d: 2 * i // d), "integer"),
    (lambda n, d, base=10000.0: _table(
        n, d, base, lambda i, d: 2 * i / d,
        positions=torch.arange(1, n + 1, dtype=torch.float64)[:, None]), "positions start at 0"),
    (lambda n, d, base=10000.0: torch.stack([
        torch.sin(torch.arange(n)[:, None] / base ** (torch.arange(d) / d)),
        torch.cos(torch.arange(n)[:, None] / base ** (torch.arange(d) / d))], -1)
        [:, torch.arange(d), torch.arange(d) % 2].float(), "share one angle"),
]


def pe_ok_stack(max_len, d_model, base=10000.0):
    angle = torch.outer(torch.arange(max_len, dtype=torch.float64),
                        torch.exp(-math.log(base) * torch.arange(0, d_model, 2) / d_model))
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model).float()


ADD_PE_SLIPS = [
    (lambda x, pe: x + pe[:, : x.size(1)], "[P4]"),
    (lambda x, pe: x + pe, "add pe[:L]"),
    (lambda x, pe: x + pe[: len(x)], "x.shape[0] is the batch"),
    (lambda x, pe: x + pe[: x.shape[2]], "x.shape[-1] is d_model"),
    (lambda x, pe: x + pe[1: x.shape[1] + 1], "the first L"),
    (lambda x, pe: x + pe[-x.shape[1]:], "the first L"),
    (lambda x, pe: x * pe[: x.shape[1]], "not multiplied"),
]


def rot_loop(k, d_model, base=10000.0, exponent=lambda i, d: 2 * i / d, swap=False,
             sign=1, at=lambda i: 2 * i):
    M = torch.zeros(d_model, d_model)
    for i in range(d_model // 2):
        b = k / base ** exponent(i, d_model)
        c, s = math.cos(b), sign * math.sin(b)
        if swap:
            c, s = s, c
        M[at(i): at(i) + 2, at(i): at(i) + 2] = torch.tensor([[c, s], [-s, c]])
    return M


PE_ROTATION_SLIPS = [
    (lambda k, d, base=10000.0: rot_loop(k, d, base, sign=-1), "rotates by -k"),
    (lambda k, d, base=10000.0: rot_loop(k, d, base, exponent=lambda i, d: 4 * i / d), "[P1]"),
    (lambda k, d, base=10000.0: rot_loop(k, d, base, exponent=lambda i, d: i / d), "not i"),
    (lambda k, d, base=10000.0: rot_loop(k, d, base, exponent=lambda i, d: 0), "not by k"),
    (lambda k, d, base=10000.0: rot_loop(k, d), "base argument"),
    (lambda k, d, base=10000.0: rot_loop(k, d, base, at=lambda i: i), "do not overlap"),
    (lambda k, d, base=10000.0: rot_loop(k, d, base, swap=True), "cosines on the diagonal"),
]


def rot_halves(k, d, base=10000.0):  # P2, written by hand
    M = torch.zeros(d, d)
    h = d // 2
    for i in range(h):
        b = k * base ** (-2 * i / d)
        M[i, i] = M[i + h, i + h] = math.cos(b)
        M[i, i + h], M[i + h, i] = math.sin(b), -math.sin(b)
    return M


PE_ROTATION_SLIPS.append((rot_halves, "[P2]"))


def rot_ok_block_diag(k, d_model, base=10000.0):
    blocks = []
    for i in range(d_model // 2):
        b = torch.tensor(k * base ** (-2 * i / d_model), dtype=torch.float64)
        blocks.append(torch.stack([torch.stack([b.cos(), b.sin()]),
                                   torch.stack([-b.sin(), b.cos()])]))
    return torch.block_diag(*blocks).float()


# ------------------------------------------------------------------ 03: split and merge
def _shape(x, h):
    B, L, d = x.shape
    return B, L, d, d // h


SPLIT_SLIPS = [
    (lambda x, h: x.view(x.shape[0], x.shape[1], -1, h).transpose(1, 2), "[H1]"),
    (lambda x, h: x.reshape(_shape(x, h)[0], h, _shape(x, h)[1], -1), "[H1]"),
    (lambda x, h: x.unflatten(-1, (-1, h)).permute(0, 3, 1, 2), "[H1]"),
    (lambda x, h: torch.stack(x.split(h, dim=-1), dim=1), "[H1]"),
    (lambda x, h: x.view(*x.shape[:2], h, -1), "transpose(1, 2)"),
    (lambda x, h: x.view(x.shape[0], x.shape[1], h, x.shape[2] / h).transpose(1, 2),
     "view needs whole numbers"),
]

SPLIT_OK = [
    lambda x, h: x.unflatten(-1, (h, -1)).transpose(1, 2),
    lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=1),
    lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).permute(0, 2, 1, 3).contiguous(),
]

MERGE_SLIPS = [
    (lambda x: x.reshape(x.shape[0], x.shape[2], -1), "[H2]"),
    (lambda x: x.contiguous().view(x.shape[0], x.shape[2], x.shape[1] * x.shape[3]), "[H2]"),
    (lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], -1), "use .reshape"),
    (lambda x: x.permute(0, 2, 3, 1).flatten(2), "d_k before h"),
    (lambda x: x.transpose(2, 3).reshape(x.shape[0], x.shape[2], -1), "transpose(2, 3) swaps"),
    (lambda x: x.mean(dim=1), "side by side"),
    (lambda x: x.sum(1), "side by side"),
]

MERGE_OK = [
    lambda x: torch.cat(x.unbind(1), dim=-1),
    lambda x: x.permute(0, 2, 1, 3).flatten(-2),
    lambda x: x.transpose(1, 2).contiguous().view(x.shape[0], x.shape[2], -1),
]


# ------------------------------------------------------------------ 03: multi-head attention
class Given(nn.Module):
    """The notebook's ``__init__``."""

    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)


def learner(**slip):
    """A forward written by hand (no helpers), with one slip."""
    s = {"scale": lambda m: math.sqrt(m.d_k), "softmax_dim": -1, "invert": False,
         "split": "ok", "merge": "ok", "w_o": True, "inputs": "qkv", "proj": "qkv",
         "mask": "use", "ret": "out", "key_t": (-2, -1), **slip}

    def forward(self, query, key, value, mask=None):
        B, Lq, _ = query.shape
        h, d_k = self.num_heads, self.d_k
        src = {"qkv": (query, key, value), "qqq": (query, query, query),
               "qvk": (query, value, key)}[s["inputs"]]
        proj = {"qkv": (self.w_q, self.w_k, self.w_v), "qqq": (self.w_q,) * 3,
                "qvk": (self.w_q, self.w_v, self.w_k)}[s["proj"]]

        def split(t):
            if s["split"] == "h1":
                return t.view(t.shape[0], t.shape[1], d_k, h).permute(0, 3, 1, 2)
            if s["split"] == "none":
                return t.unsqueeze(1)
            if s["split"] == "reshape":  # the right shape, tokens and heads mixed
                return t.reshape(t.shape[0], h, t.shape[1], d_k)
            return t.view(t.shape[0], t.shape[1], h, d_k).transpose(1, 2)

        q, k, v = (split(w(x)) for w, x in zip(proj, src, strict=True))
        if s["split"] == "none":
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)
        else:
            scores = q @ k.transpose(*s["key_t"]) / s["scale"](self)
        if s["mask"] == "unsqueeze" and mask is not None:
            mask = mask.unsqueeze(1)
        if s["mask"] == "squeeze" and mask is not None:
            mask = mask.squeeze(1)  # (B, 1, Lk) lines up with (B, h, Lq, Lk) as (1, B, 1, Lk)
        if s["mask"] == "times" and mask is not None:
            scores = scores * mask
        elif mask is not None and s["mask"] != "ignore":
            blocked = mask if s["invert"] else ~mask
            scores = scores.masked_fill(blocked, float("-inf"))
        weights = torch.nan_to_num(scores.softmax(dim=s["softmax_dim"]), 0.0)
        if s["mask"] == "times" and mask is not None:
            weights = weights * mask  # blocked keys 0 afterwards, but e^0 took its share
        out = weights @ v  # (B, h, Lq, d_k)
        self.attention_weights = weights  # the figures after the check plot them
        if s["merge"] == "h2":
            out = out.reshape(B, Lq, -1)
        elif s["merge"] == "view":
            out = out.transpose(1, 2).view(B, Lq, -1)
        elif s["merge"] == "w_o_first":
            out = self.w_o(out)
            return out.transpose(1, 2).reshape(B, Lq, -1)
        else:
            out = out.transpose(1, 2).reshape(B, Lq, -1)
        out = self.w_o(out) if s["w_o"] else out
        return (out, weights) if s["ret"] == "both" else out

    return type("MyMultiHeadAttention", (Given,), {"forward": forward})


MHA_SLIPS = [
    (learner(scale=lambda m: 1.0), "[A1]"),
    (learner(scale=lambda m: math.sqrt(m.d_model)), "[A1]"),
    (learner(scale=lambda m: m.d_k), "[A6]"),
    (learner(w_o=False), "[H3]"),
    (learner(split="h1"), "[H1]"),
    (learner(merge="h2"), "[H2]"),
    (learner(softmax_dim=-2), "[A4]"),
    (learner(invert=True), "[A3]"),
    (learner(mask="ignore"), "pass the mask on"),
    (learner(inputs="qqq"), "take the keys from key"),
    (learner(inputs="qvk"), "not the other way round"),
    (learner(proj="qqq"), "its own projection"),
    (learner(proj="qvk"), "its own projection"),
    (learner(split="none"), "split q, k and v into heads"),
    (learner(merge="w_o_first"), "merge the heads first"),
    (learner(ret="both"), "not (output, weights)"),
    (learner(merge="view"), "use .reshape"),
    # issue 39: slips that today's catalogue named only generically, or not at all
    (learner(split="reshape"), "[H1]"),
    (learner(mask="squeeze"), "keep the mask's head axis"),
    (learner(mask="unsqueeze"), "four axes"),
    (learner(softmax_dim=1), "[A4]"),
    (learner(mask="times"), "e^0 = 1"),
    (learner(key_t=(1, 2)), "transpose(1, 2)"),
]


class PrescaledQueries(MultiHeadAttention):
    """Scales the queries by hand, then calls the course's attention, which scales again."""

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.w_q(query), self.num_heads) / math.sqrt(self.d_k)
        k = split_heads(self.w_k(key), self.num_heads)
        v = split_heads(self.w_v(value), self.num_heads)
        from helpers.attention import scaled_dot_product_attention
        return self.w_o(merge_heads(scaled_dot_product_attention(q, k, v, mask)[0]))


class MaskUnsqueezed(MultiHeadAttention):
    """Adds a head axis to a mask that already has one."""

    def forward(self, query, key, value, mask=None):
        from helpers.attention import scaled_dot_product_attention
        q, k, v = (split_heads(w(x), self.num_heads)
                   for w, x in ((self.w_q, query), (self.w_k, key), (self.w_v, value)))
        mask = None if mask is None else mask.unsqueeze(1)
        return self.w_o(merge_heads(scaled_dot_product_attention(q, k, v, mask)[0]))


MHA_SLIPS += [(PrescaledQueries, "[A6]"), (MaskUnsqueezed, "four axes")]


# ------------------------------------------------------------------ the tests
CASES = ([("masked_softmax", fn, shown) for fn, shown in MASKED_SOFTMAX_SLIPS]
         + [("scaled_dot_product_attention", fn, shown) for fn, shown in ATTENTION_SLIPS]
         + [("sinusoidal_encoding", fn, shown) for fn, shown in SINUSOIDAL_SLIPS]
         + [("add_positional_encoding", fn, shown) for fn, shown in ADD_PE_SLIPS]
         + [("pe_rotation", fn, shown) for fn, shown in PE_ROTATION_SLIPS]
         + [("split_heads", fn, shown) for fn, shown in SPLIT_SLIPS]
         + [("merge_heads", fn, shown) for fn, shown in MERGE_SLIPS]
         + [("multi_head_attention", fn, shown) for fn, shown in MHA_SLIPS])


@pytest.mark.parametrize("name, fn, shown", CASES,
                         ids=[f"{name}-{i}" for i, (name, _, _) in enumerate(CASES)])
def test_a_slip_is_refused_and_named(run_check, name, fn, shown):
    ok, out = run_check(name, fn)
    assert ok is False, out
    assert shown in out, out
    assert GENERIC not in out, out


OK = ([("masked_softmax", fn) for fn in (ms_ok_inf_then_zero, ms_ok_where, ms_ok_any)]
      + [("scaled_dot_product_attention", fn) for fn in (attn_ok_einsum, attn_ok_mT)]
      + [("sinusoidal_encoding", pe_ok_stack), ("pe_rotation", rot_ok_block_diag)]
      + [("add_positional_encoding", lambda x, pe: x + pe[None, : x.shape[1], :]),
         ("add_positional_encoding", lambda x, pe: torch.add(x, pe.narrow(0, 0, x.size(1))))]
      + [("split_heads", fn) for fn in SPLIT_OK] + [("merge_heads", fn) for fn in MERGE_OK]
      + [("multi_head_attention", learner())])


@pytest.mark.parametrize("name, fn", OK, ids=[f"{name}-{i}" for i, (name, _) in enumerate(OK)])
def test_a_correct_answer_written_differently_passes(run_check, name, fn):
    ok, out = run_check(name, fn)
    assert ok is True, out


def test_many_slips_per_exercise():
    counts = {}
    for name, _, _ in CASES:
        counts[name] = counts.get(name, 0) + 1
    assert min(counts.values()) >= 6, counts
