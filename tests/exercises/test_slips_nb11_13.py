"""Slips a learner is likely to make in notebooks 11-13, written as a learner would (not the
registry's variants): each must fail with its own hint (a pitfall id, or words of its hint), and
answers written differently from the references must pass. The all-reduce check starts two
processes: its tests are slow."""

import math

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from helpers.data import EOS_ID, PAD_ID
from helpers.attention import KVCache
from helpers.generation import sample_next
from helpers.gpt import Block
from helpers.layers import LayerNorm, layer_stack
from helpers.masks import causal_mask
from helpers.positional import PositionalEncoding, rope_angles

# ---- notebook 11 ------------------------------------------------------------------------------

ALIGNMENT = [
    (lambda w: torch.max(w, dim=-2).indices, "[I3]"),
    (lambda w: w.T.argmax(dim=-1) if w.dim() == 2 else w.transpose(-1, -2).argmax(-1), "[I3]"),
    (lambda w: torch.max(w, -1)[0], "not how large it is"),
    (lambda w: w.min(dim=-1).indices, "LARGEST weight"),
    (lambda w: torch.argmax(w), "argmax without dim"),
    (lambda w: w.argmax(-1).unsqueeze(-1), "without keepdim"),
    (lambda w: (-w).argmax(dim=-1), "LARGEST weight"),
]
ALIGNMENT_RIGHT = [lambda w: w.sort(dim=-1, descending=True).indices[..., 0],
                   lambda w: torch.max(w, dim=-1).indices]


def entropy_nan(w):
    return -(w * torch.log2(w)).sum(-1)


def entropy_nats(w):
    return torch.special.entr(w).sum(-1)


ENTROPY = [
    (entropy_nan, "[I1]"),
    (lambda w: -torch.sum(w * torch.log(w) / math.log(2), dim=-1), "[I1]"),
    (lambda w: -(w * w.clamp(min=1e-30).log2()).sum(dim=-2), "[I2]"),
    (entropy_nats, "natural log"),
    (lambda w: -(w * torch.log(w.clamp(min=1e-30))).sum(-1), "natural log"),
    (lambda w: (w * torch.log2(w.clamp(min=1e-30))).sum(-1), "minus sign"),
    (lambda w: -(w * w.clamp(min=1e-30).log10()).sum(-1), "uses log2"),
    (lambda w: -torch.log2(w).sum(-1), "factor w"),
    (lambda w: -(w * w.clamp(min=1e-30).log2()).mean(-1), "not a mean"),
    (lambda w: -(w * w.clamp(min=1e-30).log2()).sum(-1, keepdim=True), "keepdim"),
    (lambda w: -(w * w.clamp(min=1e-30).log2()).sum((-1, -2)), "not over the whole map"),
]
ENTROPY_RIGHT = [lambda w: -torch.xlogy(w, w).sum(-1) / math.log(2),
                 lambda w: -(w * torch.log2(w)).nan_to_num().sum(-1),
                 lambda w: -torch.where(w > 0, w * torch.log2(w), torch.zeros_like(w)).sum(-1)]


def zeroed(x, columns):
    x = x.clone()
    x[..., columns] = 0
    return x


def zero_interleaved(merged, head, num_heads):
    view = merged.reshape(*merged.shape[:-1], -1, num_heads).clone()  # (B, L, d_k, h)
    view[..., head] = 0
    return view.reshape(merged.shape)


ZERO_HEAD = [
    (zero_interleaved, "[I4]"),
    (lambda m, i, h: zeroed(m, list(range(i, m.shape[-1], h))), "[I4]"),
    (lambda m, i, h: zeroed(m, slice(i * h, i * h + h)), "not num_heads of them"),
    (lambda m, i, h: zeroed(m, slice(i * (m.shape[-1] // h), (i + 1) * (m.shape[-1] // h) + 1)),
     "slices leave out their end"),
    (lambda m, i, h: zeroed(m, slice((i - 1) * (m.shape[-1] // h), i * (m.shape[-1] // h))),
     "counted from 0"),
    (lambda m, i, h: zeroed(m, slice(i * (m.size(1) // h), (i + 1) * (m.size(1) // h))),
     "the LAST axis"),
    (lambda m, i, h: m * (torch.arange(m.shape[-1]) // (m.shape[-1] // h) == i), "ONE head"),
    (lambda m, i, h: torch.cat([m[:, :i], torch.zeros_like(m[:, i:i + 1]), m[:, i + 1:]], 1),
     "axis 1 holds the positions"),
]


def zero_by_view(merged, head, num_heads):
    B, L, d = merged.shape
    heads = merged.reshape(B, L, num_heads, d // num_heads).clone()
    heads[:, :, head] = 0
    return heads.reshape(B, L, d)


def zero_by_mask(merged, head, num_heads):
    d_k = merged.shape[-1] // num_heads
    keep = torch.ones(merged.shape[-1])
    keep[head * d_k:(head + 1) * d_k] = 0
    return merged * keep


@pytest.mark.parametrize("name, cases, right", [
    ("source_alignment", ALIGNMENT, ALIGNMENT_RIGHT),
    ("attention_entropy", ENTROPY, ENTROPY_RIGHT),
    ("zero_head", ZERO_HEAD, [zero_by_view, zero_by_mask]),
], ids=["source_alignment", "attention_entropy", "zero_head"])
def test_notebook_11_slips_are_named_and_right_answers_pass(run_check, name, cases, right):
    _named(run_check, name, cases, right)


def _named(run_check, name, cases, right):
    for fn, expected in cases:
        passed, text = run_check(name, fn)
        assert not passed, (name, expected, text)
        assert expected in text, (name, expected, text)
        assert "Compare your code with the equation" not in text, text
    for fn in right:
        passed, text = run_check(name, fn)
        assert passed, text


# ---- notebook 12: generate_tokens --------------------------------------------------------------

def _loop(prefill="whole", uncached=False, cache_per_step=False, refeed=False, greedy=False,
          stop=lambda done: done.all(), steps=lambda max_new, room: min(max_new, room)):
    """A learner's loop: the prefill, then one token per step with the model's KVCache."""
    def loop(model, prompt, max_new, temperature=0.0, generator=None):
        cache, out, P = KVCache(), prompt, prompt.shape[1]
        done = torch.zeros(len(prompt), dtype=torch.bool)
        for i in range(steps(max_new, model.config.max_len - P)):
            if uncached:
                logits = model(out)
            elif i == 0 and prefill == "one by one":
                for t in range(P):
                    logits = model(out[:, t:t + 1], cache=cache)
            elif i == 0 and prefill == "then the last token":
                model(out, cache=cache)
                logits = model(out[:, -1:], cache=cache)
            elif i == 0:
                logits = model(out, cache=cache)
            else:
                new = out if refeed else out[:, -1:]
                logits = model(new, cache=KVCache() if cache_per_step else cache)
            token = (logits[:, -1].argmax(-1) if greedy
                     else sample_next(logits[:, -1], temperature, generator=generator))
            token = torch.where(done, torch.full_like(token, EOS_ID), token)
            out = torch.cat([out, token.unsqueeze(1)], dim=1)
            done = done | (token == EOS_ID)
            if stop(done):
                break
        return out
    return loop


GENERATE = [
    (_loop(cache_per_step=True), "[G7]"),
    (_loop(prefill="one by one"), "[G9]"),
    (_loop(uncached=True), "[G10]"),
    (_loop(refeed=True), "stored twice"),
    (_loop(greedy=True), "greedy at temperature 0"),
    (_loop(prefill="then the last token"), "the prefill's last row of logits"),
    (_loop(stop=lambda done: bool(done[0])), "[D6]"),
    (_loop(stop=lambda done: False), "[D6]"),
    (_loop(steps=lambda max_new, room: min(max_new, room - 1)), "positions 0 ... max_len-1"),
]


def loop_by_size(model, prompt, max_new, temperature=0.0, generator=None):
    """The prefill and the steps told apart by the cache's length."""
    cache, out = KVCache(), prompt
    done = torch.zeros(len(prompt), dtype=torch.bool)
    for _ in range(min(max_new, model.config.max_len - out.size(1))):
        logits = model(out if cache.length == 0 else out[:, cache.length:], cache=cache)
        token = sample_next(logits[:, -1], temperature, generator=generator)
        token = token.masked_fill(done, EOS_ID)
        out, done = torch.cat([out, token[:, None]], 1), done | (token == EOS_ID)
        if done.all():
            break
    return out


def test_generate_tokens_slips_are_named(run_check):
    _named(run_check, "generate_tokens", GENERATE, [_loop(), loop_by_size])


def recompute_with_a_fresh_cache(model, prompt, max_new, temperature=0.0, generator=None):
    """No cache kept: the whole sequence with a fresh KVCache at every step."""
    out, done = prompt, torch.zeros(len(prompt), dtype=torch.bool)
    for _ in range(min(max_new, model.config.max_len - prompt.shape[1])):
        logits = model(out, cache=KVCache())
        token = sample_next(logits[:, -1], temperature, generator=generator)
        token = token.masked_fill(done, EOS_ID)
        out, done = torch.cat([out, token[:, None]], 1), done | (token == EOS_ID)
        if done.all():
            break
    return out


def test_recomputing_without_the_cache_is_refused_though_its_tokens_are_right(run_check):
    passed, text = run_check("generate_tokens", recompute_with_a_fresh_cache)
    assert not passed and "[G10]" in text and "calls (tokens fed, start)" in text, text


# ---- notebook 12: min_p_filter, rms_norm --------------------------------------------------------

def min_p_sorted(logits, temperature, min_p):
    logits = logits / temperature
    probs = torch.softmax(logits, -1)
    top = probs.sort(-1, descending=True).values[..., :1]
    return torch.where(probs >= min_p * top, logits, torch.full_like(logits, -math.inf))


MIN_P = [
    (lambda z, t, m: torch.where(z.softmax(-1) >= m * z.softmax(-1).amax(-1, keepdim=True),
                                 z / t, torch.tensor(-math.inf)), "[G3]"),
    (lambda z, t, m: (z / t).masked_fill((z / t).softmax(-1) < m, -math.inf), "TIMES"),
    (lambda z, t, m: (z / t).masked_fill(
        (z / t).softmax(-1) <= m * (z / t).softmax(-1).max(-1, keepdim=True)[0], -math.inf),
     "equals the bar"),
    (lambda z, t, m: (z / t).masked_fill(
        (z / t).softmax(-1) < m * (z / t).softmax(-1).max(0, keepdim=True)[0], -math.inf),
     "each row is its own"),
    (lambda z, t, m: (z / t).softmax(-1) * ((z / t).softmax(-1) >= m * (z / t).softmax(
        -1).max(-1, keepdim=True)[0]), "return logits"),
    (lambda z, t, m: (z / t) * ((z / t).softmax(-1) >= m * (z / t).softmax(
        -1).max(-1, keepdim=True)[0]), "still has a probability"),
]


def rms_by_norm(x, weight, eps=1e-6):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * weight


RMS = [
    (lambda x, w, eps=1e-6: (x - x.mean(-1, keepdim=True)) / torch.sqrt(
        ((x - x.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True) + eps) * w, "[G1]"),
    (lambda x, w, eps=1e-6: x / (torch.sqrt((x ** 2).mean(-1, keepdim=True)) + eps) * w,
     "eps goes inside"),
    (lambda x, w, eps=1e-6: x / ((x ** 2).mean(-1, keepdim=True) + eps) * w, "ROOT"),
    (lambda x, w, eps=1e-6: x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + eps), "gain"),
    (lambda x, w, eps=1e-6: x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + 1e-6) * w,
     "use the eps"),
    (lambda x, w, eps=1e-6: x / (x.abs().mean(-1, keepdim=True) + eps) * w, "mean of |x|"),
    (lambda x, w, eps=1e-6: x / torch.sqrt((x ** 2).mean(0, keepdim=True) + eps) * w,
     "LAST axis"),
]


def test_min_p_and_rms_norm_slips_are_named(run_check):
    _named(run_check, "min_p_filter", MIN_P, [min_p_sorted])
    _named(run_check, "rms_norm", RMS, [rms_by_norm])


# ---- notebook 12: continuation_example, gpt, filter_logits, apply_rope --------------------------

def _sequence(prompt, answer):
    return prompt + answer


def example_extends_the_prompt(prompt, answer):
    prompt.extend(answer)
    return prompt[:-1], [PAD_ID] * (len(prompt) - len(answer) - 1) + answer


CONTINUATION = [
    (lambda p, a: (_sequence(p, a)[:-1], _sequence(p, a)[1:]), "[G5]"),
    (lambda p, a: (torch.tensor(p + a)[:-1], torch.tensor(p + a)[:-1]), "[T1]"),
    (lambda p, a: ((p + a)[:-1], [PAD_ID] * len(p) + a), "[T1]"),
    (lambda p, a: (p + a, [PAD_ID] * len(p) + a), "[T1]"),
    (lambda p, a: ((p + a)[1:], [PAD_ID] * (len(p) - 1) + (p + a)[len(p) - 1:-1]),
     "token BEFORE it"),
    (lambda p, a: ((p + a)[:-1], [-100] * (len(p) - 1) + a), "not -100"),
    (lambda p, a: ((p + a)[:-1], [PAD_ID] * (len(p) - 1) + a[:-1]), "<eos> is the last label"),
    (lambda p, a: ((p + a)[:-1], [PAD_ID] * (len(p) - 1) + a[:-1] + [PAD_ID]),
     "<eos> is the last label"),
    (lambda p, a: ((p + a + [EOS_ID])[:-1], [PAD_ID] * (len(p) - 1) + a + [EOS_ID]),
     "already ends with <eos>"),
    (lambda p, a: ((p + a[:-1])[:-1], [PAD_ID] * (len(p) - 1) + a[:-1]),
     "keep <eos> in the sequence"),
    (lambda p, a: ((p + a)[:-1], [PAD_ID] * len(p) + a[1:]), "predicts the first French word"),
    (lambda p, a: ((p + a)[:-1], [tok if i >= len(p) else PAD_ID
                                  for i, tok in enumerate((p + a)[1:])]),
     "predicts the first French word"),
    (lambda p, a: ((p + a)[:-1], [PAD_ID] * (len(p) - 2) + [p[-1]] + a),
     "<sep> is part of the prompt"),
    (lambda p, a: ((p + a)[:-1], [PAD_ID if t in p else t for t in (p + a)[1:]]), "by POSITION"),
    (lambda p, a: ((p + a)[:-1], [t if t in a else PAD_ID for t in (p + a)[1:]]), "by POSITION"),
    (lambda p, a: ([PAD_ID] * (len(p) - 1) + a, (p + a)[:-1]), "in this order"),
    (lambda p, a: ((p + a)[:-1], a), "one label per input position"),
    (lambda p, a: (p + a, [PAD_ID] * (len(p) - 1) + a + [PAD_ID]), "is a label only"),
    (lambda p, a: (p + a, [PAD_ID] * (len(p) - 1) + a), "is a label only"),
    (example_extends_the_prompt, "changes the caller's list"),
    (lambda p, a: ((p + a)[:-1], [PAD_ID] * (len(p) - 1) + (p + a)[len(p) + 1:] + [PAD_ID]),
     "not t + 2"),
    (lambda p, a: ((p + a)[:-1], [PAD_ID] * (len(p) - 1) + [p[-1]] + a[:-1]), "[T1]"),
]


def example_by_enumerate(prompt, answer):
    sequence = [*prompt, *answer]
    labels = [PAD_ID if t < len(prompt) - 1 else token
              for t, token in enumerate(sequence[1:])]
    return sequence[:-1], labels


def example_as_tuples(prompt, answer):
    sequence = tuple(prompt) + tuple(answer)
    return sequence[:-1], (PAD_ID,) * (len(prompt) - 1) + tuple(answer)


def example_by_slices(prompt, answer):
    labels = torch.tensor(prompt[1:] + answer)
    labels[:len(prompt) - 1] = PAD_ID
    return torch.tensor(prompt + answer[:-1]), labels


class NotebookGPT(nn.Module):
    """The __init__ notebook 12 gives MyGPT (sinusoidal positions, LayerNorm, tied head)."""

    def __init__(self, vocab_size, config):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(vocab_size, config.d_model)
        self.positional = PositionalEncoding(config.d_model, config.max_len, config.dropout)
        self.blocks = layer_stack(lambda: Block(config), config.num_layers)
        self.final_norm = LayerNorm(config.d_model) if config.norm_first else nn.Identity()
        self.head = nn.Linear(config.d_model, vocab_size)
        self.head.weight = self.embed.weight


def _gpt(forward, init=None):
    """A learner's class: the notebook's __init__ (or ``init``) and ``forward``."""
    body = {"forward": forward} | ({"__init__": init} if init else {})
    return type("MyGPT", (NotebookGPT,), body)


def _embed(self, tokens, start=0):
    return self.positional(self.embed(tokens) * math.sqrt(self.config.d_model), start)


def _future_hidden(tokens):
    L = tokens.shape[1]
    return torch.tril(torch.ones(L, L, dtype=torch.bool)).view(1, 1, L, L)


def _stack(self, x, mask, cache=None):
    for block in self.blocks:
        x = block(x, mask, cache)
    return x


def gpt_sees_the_future(self, tokens, mask=None):
    return self.head(self.final_norm(_stack(self, _embed(self, tokens), mask)))


def gpt_inverted_mask(self, tokens, mask=None):
    if mask is None:
        L = tokens.shape[1]
        mask = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)[None, None]
    return self.head(self.final_norm(_stack(self, _embed(self, tokens), mask)))


def gpt_2d_mask(self, tokens, mask=None):
    if mask is None:
        mask = torch.tril(torch.ones(tokens.shape[1], tokens.shape[1])).bool()
    return self.head(self.final_norm(_stack(self, _embed(self, tokens), mask)))


def gpt_3d_mask(self, tokens, mask=None):
    mask = causal_mask(tokens.size(1)).unsqueeze(0) if mask is None else mask
    return self.head(self.final_norm(_stack(self, _embed(self, tokens), mask)))


def gpt_float_mask(self, tokens, mask=None):
    L = tokens.shape[1]
    mask = torch.ones(L, L).tril()[None, None] if mask is None else mask
    return self.head(self.final_norm(_stack(self, _embed(self, tokens), mask)))


def gpt_length_from_batch(self, tokens, mask=None):
    mask = causal_mask(len(tokens))[None, None] if mask is None else mask
    return self.head(self.final_norm(_stack(self, _embed(self, tokens), mask)))


def gpt_no_positions(self, tokens, mask=None):
    mask = _future_hidden(tokens) if mask is None else mask
    x = self.embed(tokens) * self.config.d_model ** 0.5
    return self.head(self.final_norm(_stack(self, x, mask)))


def gpt_positions_scaled(self, tokens, mask=None):
    mask = _future_hidden(tokens) if mask is None else mask
    x = self.positional(self.embed(tokens)) * math.sqrt(self.config.d_model)
    return self.head(self.final_norm(_stack(self, x, mask)))


def gpt_unscaled(self, tokens, mask=None):
    mask = _future_hidden(tokens) if mask is None else mask
    return self.head(self.final_norm(_stack(self, self.positional(self.embed(tokens)), mask)))


def gpt_times_d_model(self, tokens, mask=None):
    mask = _future_hidden(tokens) if mask is None else mask
    x = self.positional(self.embed(tokens) * self.config.d_model)
    return self.head(self.final_norm(_stack(self, x, mask)))


def gpt_divided(self, tokens, mask=None):
    mask = _future_hidden(tokens) if mask is None else mask
    x = self.positional(self.embed(tokens) / math.sqrt(self.config.d_model))
    return self.head(self.final_norm(_stack(self, x, mask)))


def gpt_sqrt_d_k(self, tokens, mask=None):
    mask = _future_hidden(tokens) if mask is None else mask
    d_k = self.config.d_model // self.config.num_heads
    x = self.positional(self.embed(tokens) * math.sqrt(d_k))
    return self.head(self.final_norm(_stack(self, x, mask)))


def gpt_no_final_norm(self, tokens, mask=None):
    mask = _future_hidden(tokens) if mask is None else mask
    return self.head(_stack(self, _embed(self, tokens), mask))


def gpt_norm_in_the_loop(self, tokens, mask=None):
    mask = _future_hidden(tokens) if mask is None else mask
    x = _embed(self, tokens)
    for block in self.blocks:
        x = self.final_norm(block(x, mask))
    return self.head(x)


def gpt_residual_again(self, tokens, mask=None):
    mask = _future_hidden(tokens) if mask is None else mask
    x = _embed(self, tokens)
    for block in self.blocks:
        x = x + block(x, mask)
    return self.head(self.final_norm(x))


def gpt_blocks_side_by_side(self, tokens, mask=None):
    mask = _future_hidden(tokens) if mask is None else mask
    x = _embed(self, tokens)
    out = x
    for block in self.blocks:
        out = block(x, mask)
    return self.head(self.final_norm(out))


def gpt_embedding_as_head(self, tokens, mask=None):
    mask = _future_hidden(tokens) if mask is None else mask
    return self.final_norm(_stack(self, _embed(self, tokens), mask)) @ self.embed.weight.t()


def gpt_softmax(self, tokens, mask=None):
    mask = _future_hidden(tokens) if mask is None else mask
    return F.softmax(self.head(self.final_norm(_stack(self, _embed(self, tokens), mask))), -1)


def gpt_log_softmax(self, tokens, mask=None):
    mask = _future_hidden(tokens) if mask is None else mask
    return F.log_softmax(self.head(self.final_norm(_stack(self, _embed(self, tokens), mask))), -1)


def gpt_last_position(self, tokens, mask=None):
    mask = _future_hidden(tokens) if mask is None else mask
    return self.head(self.final_norm(_stack(self, _embed(self, tokens), mask)[:, -1]))


def gpt_always_causal(self, tokens, mask=None):
    return self.head(self.final_norm(_stack(self, _embed(self, tokens), _future_hidden(tokens))))


def gpt_blocks_called(self, tokens, mask=None):
    mask = _future_hidden(tokens) if mask is None else mask
    return self.head(self.final_norm(self.blocks(_embed(self, tokens), mask)))


def gpt_mask_or(self, tokens, mask=None):
    mask = mask or _future_hidden(tokens)
    return self.head(self.final_norm(_stack(self, _embed(self, tokens), mask)))


def gpt_right(self, tokens, mask=None, cache=None):
    start = cache.length if cache else 0
    if mask is None:
        mask = causal_mask(start + tokens.shape[1])[start:].unsqueeze(0).unsqueeze(0)
    x = _stack(self, _embed(self, tokens, start), mask, cache)
    if cache:
        cache.length += tokens.shape[1]
    return self.head(self.final_norm(x))


def gpt_cached_at_zero(self, tokens, mask=None, cache=None):
    L, start = tokens.shape[1], (cache.length if cache else 0)
    mask = causal_mask(start + L)[None, None, -L:] if mask is None else mask
    x = _stack(self, _embed(self, tokens), mask, cache)  # the positions from 0 again
    if cache:
        cache.length += L
    return self.head(self.final_norm(x))


def gpt_cache_kept_from_blocks(self, tokens, mask=None, cache=None):
    L, start = tokens.shape[1], (cache.length if cache else 0)
    mask = causal_mask(start + L)[None, None, -L:] if mask is None else mask
    x = _stack(self, _embed(self, tokens, start), mask)
    if cache:
        cache.length += L
    return self.head(self.final_norm(x))


def gpt_cache_mask_of_new_tokens(self, tokens, mask=None, cache=None):
    L, start = tokens.shape[1], (cache.length if cache else 0)
    mask = causal_mask(L)[None, None] if mask is None else mask
    x = _stack(self, _embed(self, tokens, start), mask, cache)
    if cache:
        cache.length += L
    return self.head(self.final_norm(x))


def untied_init(self, vocab_size, config):
    NotebookGPT.__init__(self, vocab_size, config)
    self.head = nn.Linear(config.d_model, vocab_size)  # "my own output layer"


def gpt_mask_and_causal(self, tokens, mask=None, cache=None):
    L, start = tokens.shape[1], (0 if cache is None else cache.length)
    causal = torch.ones(L, start + L, dtype=torch.bool).tril(start)[None, None]
    mask = causal if mask is None else mask & causal
    x = _stack(self, _embed(self, tokens, start), mask, cache)
    if cache is not None:
        cache.length = start + L
    return self.head(self.final_norm(x))


GPT_SLIPS = [
    (_gpt(gpt_sees_the_future), "[G6]"),
    (_gpt(gpt_inverted_mask), "see the FUTURE"),
    (_gpt(gpt_2d_mask), "needs four axes"),
    (_gpt(gpt_3d_mask), "needs four axes"),
    (_gpt(gpt_float_mask), "a bool tensor"),
    (_gpt(gpt_length_from_batch), "tokens.shape[1]"),
    (_gpt(gpt_no_positions), "add the positions"),
    (_gpt(gpt_positions_scaled), "BEFORE self.positional"),
    (_gpt(gpt_unscaled), "[T2]"),
    (_gpt(gpt_times_d_model), "square ROOT"),
    (_gpt(gpt_divided), "MULTIPLY"),
    (_gpt(gpt_sqrt_d_k), "sqrt(d_k) is attention's scale"),
    (_gpt(gpt_no_final_norm), "one more norm"),
    (_gpt(gpt_norm_in_the_loop), "after the LAST block"),
    (_gpt(gpt_residual_again), "its own residual"),
    (_gpt(gpt_blocks_side_by_side), "the output of the one before"),
    (_gpt(gpt_embedding_as_head), "its own bias"),
    (_gpt(gpt_softmax), "without a softmax"),
    (_gpt(gpt_log_softmax), "without log_softmax"),
    (_gpt(gpt_last_position), "EVERY position"),
    (_gpt(gpt_always_causal), "use the mask you are given"),
    (_gpt(gpt_right, untied_init), "self.head.weight = self.embed.weight"),
    (_gpt(gpt_blocks_called), "not a module you can call"),
    (_gpt(gpt_mask_or), "test `mask is None`"),
    (_gpt(gpt_cached_at_zero), "[G7]"),
    (_gpt(gpt_cache_kept_from_blocks), "pass the cache on"),
    (_gpt(gpt_cache_mask_of_new_tokens), "start + L keys"),
]


INF = float("-inf")


def _sorted(logits):
    ordered, index = torch.sort(logits, dim=-1, descending=True)
    return ordered, index, torch.softmax(ordered, dim=-1)


def _back(logits, ordered, index):
    return torch.zeros_like(logits).scatter(-1, index, ordered)


def top_p_after_temperature(logits, temperature, top_p):
    ordered, index, probs = _sorted(logits)
    ordered = ordered.masked_fill(probs.cumsum(-1) - probs >= top_p, INF)
    return _back(logits, ordered, index) / temperature


def top_p_gist(logits, temperature, top_p):  # the widely copied gist: cumsum > p, shifted right
    logits = logits / temperature
    ordered, index, probs = _sorted(logits)
    remove = probs.cumsum(-1) > top_p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    return logits.masked_fill(remove.scatter(-1, index, remove), INF)


def top_p_below(logits, temperature, top_p):
    logits = logits / temperature
    ordered, index, probs = _sorted(logits)
    return _back(logits, ordered.masked_fill(probs.cumsum(-1) > top_p, INF), index)


def top_p_strictly_below_first_kept(logits, temperature, top_p):
    logits = logits / temperature
    ordered, index, probs = _sorted(logits)
    keep = probs.cumsum(-1) < top_p
    keep[:, 0] = True
    return _back(logits, ordered.masked_fill(~keep, INF), index)


def _filtered(keep_sorted):
    """A learner's top-p whose sorted rows keep ``keep_sorted(ordered, probs, top_p)``."""
    def fn(logits, temperature, top_p):
        logits = logits / temperature
        ordered, index, probs = _sorted(logits)
        return _back(logits, ordered.masked_fill(~keep_sorted(ordered, probs, top_p), INF),
                     index)
    return fn


def top_p_ascending(logits, temperature, top_p):
    logits = logits / temperature
    ordered, index = logits.sort(-1)
    probs = ordered.softmax(-1)
    return _back(logits, ordered.masked_fill(probs.cumsum(-1) - probs >= top_p, INF), index)


def top_p_probabilities(logits, temperature, top_p):
    probs = (logits / temperature).softmax(-1)
    ordered, index = probs.sort(-1, descending=True)
    ordered = ordered.masked_fill(ordered.cumsum(-1) - ordered >= top_p, 0.0)
    return _back(logits, ordered, index)


def top_p_zero(logits, temperature, top_p):
    logits = logits / temperature
    ordered, index, probs = _sorted(logits)
    return _back(logits, ordered * (probs.cumsum(-1) - probs < top_p), index)


def top_p_sorted_order(logits, temperature, top_p):
    ordered, _, probs = _sorted(logits / temperature)
    return ordered.masked_fill(probs.cumsum(-1) - probs >= top_p, INF)


def top_p_gather(logits, temperature, top_p):
    ordered, index, probs = _sorted(logits / temperature)
    return ordered.masked_fill(probs.cumsum(-1) - probs >= top_p, INF).gather(-1, index)


def top_p_unsorted(logits, temperature, top_p):
    logits = logits / temperature
    probs = logits.softmax(-1)
    return logits.masked_fill(probs.cumsum(-1) - probs >= top_p, INF)


def top_p_sorted_mask(logits, temperature, top_p):
    logits = logits / temperature
    _, _, probs = _sorted(logits)
    return logits.masked_fill(probs.cumsum(-1) - probs >= top_p, INF)


def top_p_times(logits, temperature, top_p):
    return _filtered(lambda o, p, t: p.cumsum(-1) - p < t)(logits * temperature, 1.0, top_p)


def top_p_softmax_over_batch(logits, temperature, top_p):
    logits = logits / temperature
    ordered, index = torch.sort(logits, dim=-1, descending=True)
    probs = ordered.softmax(0)
    return _back(logits, ordered.masked_fill(probs.cumsum(-1) - probs >= top_p, INF), index)


def top_p_renormalised(logits, temperature, top_p):
    return _filtered(lambda o, p, t: p.cumsum(-1) - p < t)(logits, temperature, top_p).softmax(-1)


def top_p_log_probs(logits, temperature, top_p):
    kept = _filtered(lambda o, p, t: p.cumsum(-1) - p < t)(logits, temperature, top_p)
    return kept - kept.logsumexp(-1, keepdim=True)


def top_p_no_temperature(logits, temperature, top_p):
    ordered, index, probs = _sorted(logits)
    return _back(logits, ordered.masked_fill(probs.cumsum(-1) - probs >= top_p, INF), index)


def top_p_not_assigned(logits, temperature, top_p):
    logits = logits / temperature
    ordered, index, probs = _sorted(logits)
    ordered.masked_fill(probs.cumsum(-1) - probs >= top_p, INF)
    return _back(logits, ordered, index)


def top_p_total_over_batch(logits, temperature, top_p):
    logits = logits / temperature
    ordered, index, probs = _sorted(logits)
    before = probs.cumsum(0) - probs
    return _back(logits, ordered.masked_fill(before >= top_p, INF), index)


def top_p_in_place(logits, temperature, top_p):
    logits /= temperature
    return _filtered(lambda o, p, t: p.cumsum(-1) - p < t)(logits, 1.0, top_p)


FILTER = [
    (top_p_after_temperature, "[G3]"),
    (top_p_gist, "mass is >= top_p"),
    (top_p_below, "[G4]"),
    (top_p_strictly_below_first_kept, "[G4]"),
    (_filtered(lambda o, p, t: p.cumsum(-1) <= t), "[G4]"),
    (_filtered(lambda o, p, t: p.cumsum(-1) - p <= t), "mass is >= top_p"),
    (top_p_ascending, "DESCENDING"),
    (top_p_probabilities, "return logits, not probabilities"),
    (top_p_renormalised, "return logits, not probabilities"),
    (top_p_zero, "float('-inf')"),
    (top_p_sorted_order, "VOCABULARY order"),
    (top_p_gather, "a second time"),
    (top_p_unsorted, "sort first"),
    (top_p_sorted_mask, "in SORTED order"),
    (top_p_times, "DIVIDE"),
    (top_p_softmax_over_batch, "each row is its own distribution"),
    (top_p_log_probs, "log_softmax shifts"),
    (top_p_in_place, "changed its input"),
    (top_p_no_temperature, "is part of the filter's result"),
    (top_p_not_assigned, "assign its result"),
    (top_p_total_over_batch, "each row is its own distribution"),
]


def top_p_ascending_like_transformers(logits, temperature, top_p):
    logits = logits / temperature
    ordered, index = torch.sort(logits, descending=False)
    remove = ordered.softmax(-1).cumsum(-1) <= 1 - top_p
    remove[..., -1] = False
    return logits.masked_fill(remove.scatter(1, index, remove), INF)


def top_p_one_row_at_a_time(logits, temperature, top_p):
    rows = []
    for row in logits / temperature:
        probs = row.softmax(0)
        order = probs.argsort(descending=True)
        out, total = torch.full_like(row, INF), 0.0
        for i in order.tolist():
            out[i] = row[i]
            total += probs[i].item()
            if total >= top_p:
                break
        rows.append(out)
    return torch.stack(rows)


def _pairs(x):
    return x[..., 0::2], x[..., 1::2]


def _interleave(a, b):
    return torch.stack((a, b), dim=-1).flatten(-2)


def rope_rotate_half(x, angles):  # the "rotate half" recipe of some libraries
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def rope_halves_interleaved(x, angles):
    x1, x2 = x.chunk(2, dim=-1)
    c, s = angles.cos(), angles.sin()
    return _interleave(x1 * c - x2 * s, x1 * s + x2 * c)


def rope_other_way(x, angles):
    even, odd = _pairs(x)
    c, s = torch.cos(angles), torch.sin(angles)
    return _interleave(even * c + odd * s, odd * c - even * s)


def rope_no_minus(x, angles):
    even, odd = _pairs(x)
    c, s = angles.cos(), angles.sin()
    return _interleave(even * c + odd * s, even * s + odd * c)


def rope_minus_twice(x, angles):
    even, odd = _pairs(x)
    c, s = angles.cos(), angles.sin()
    return _interleave(even * c - odd * s, odd * c - even * s)


def rope_cos_sin_swapped(x, angles):
    even, odd = _pairs(x)
    c, s = angles.sin(), angles.cos()
    return _interleave(even * c - odd * s, even * s + odd * c)


def rope_concatenated(x, angles):
    even, odd = _pairs(x)
    c, s = angles.cos(), angles.sin()
    return torch.cat([even * c - odd * s, even * s + odd * c], dim=-1)


def rope_first_only(x, angles):
    out = x.clone()
    even, odd = _pairs(x)
    out[..., 0::2] = even * angles.cos() - odd * angles.sin()
    return out


def rope_second_only(x, angles):
    out = x.clone()
    even, odd = _pairs(x)
    out[..., 1::2] = even * angles.sin() + odd * angles.cos()
    return out


def rope_transposed(x, angles):
    even, odd = _pairs(x)
    theta = angles.T
    return _interleave(even * theta.cos() - odd * theta.sin(),
                       even * theta.sin() + odd * theta.cos())


def rope_repeated(x, angles):
    cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)
    turned = torch.stack([-x[..., 1::2], x[..., ::2]], -1).reshape(x.shape)
    return x * cos + turned * sin


def rope_even_odd_swapped(x, angles):
    odd, even = _pairs(x)
    c, s = angles.cos(), angles.sin()
    return _interleave(even * c - odd * s, even * s + odd * c)


def rope_overwrites(x, angles):
    out = x.clone()
    c, s = angles.cos(), angles.sin()
    out[..., 0::2] = out[..., 0::2] * c - out[..., 1::2] * s
    out[..., 1::2] = out[..., 0::2] * s + out[..., 1::2] * c
    return out


def rope_not_flattened(x, angles):
    even, odd = _pairs(x)
    c, s = angles.cos(), angles.sin()
    return torch.stack((even * c - odd * s, even * s + odd * c), dim=-1)


def rope_recomputed(x, angles):
    angles = rope_angles(x.shape[-2], x.shape[-1])
    even, odd = _pairs(x)
    return _interleave(even * angles.cos() - odd * angles.sin(),
                       even * angles.sin() + odd * angles.cos())


def rope_first_angle(x, angles):
    even, odd = _pairs(x)
    c, s = angles[0].cos(), angles[0].sin()
    return _interleave(even * c - odd * s, even * s + odd * c)


ROPE = [
    (rope_rotate_half, "[G2]"),
    (rope_halves_interleaved, "[G2]"),
    (rope_other_way, "goes the other way"),
    (rope_no_minus, "one sine has a minus"),
    (rope_minus_twice, "one sine has a minus"),
    (rope_cos_sin_swapped, "cos and sin are swapped"),
    (rope_concatenated, "back to ITS place"),
    (rope_first_only, "turn BOTH features"),
    (rope_second_only, "turn BOTH features"),
    (rope_transposed, "without .T"),
    (rope_repeated, "repeat_interleave"),
    (rope_even_odd_swapped, "the even one"),
    (rope_overwrites, "from the NEW x[2i]"),
    (rope_not_flattened, "flatten the last two axes"),
    (rope_recomputed, "use the angles you are given"),
    (rope_first_angle, "its own row of angles"),
]


def rope_full_width(x, angles):
    cos = angles.cos().repeat_interleave(2, dim=-1)
    sin = angles.sin().repeat_interleave(2, dim=-1)
    turned = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
    return x * cos + turned * sin


def rope_unbind(x, angles):
    even, odd = x.unflatten(-1, (-1, 2)).unbind(-1)
    c, s = angles.cos(), angles.sin()
    return torch.stack([c * even - s * odd, s * even + c * odd], -1).flatten(-2)


@pytest.mark.parametrize("name, cases, right", [
    ("continuation_example", CONTINUATION,
     [example_by_enumerate, example_by_slices, example_as_tuples]),
    ("gpt", GPT_SLIPS, [_gpt(gpt_right), _gpt(gpt_mask_and_causal)]),
    ("filter_logits", FILTER, [top_p_ascending_like_transformers, top_p_one_row_at_a_time]),
    ("apply_rope", ROPE, [rope_full_width, rope_unbind]),
], ids=["continuation_example", "gpt", "filter_logits", "apply_rope"])
def test_notebook_12_slips_are_named_and_right_answers_pass(run_check, name, cases, right):
    _named(run_check, name, cases, right)


# ---- notebook 13: rank_loss, rank_batch ---------------------------------------------------------

RANK_LOSS = [
    (lambda z, m, n, w: (z * m).sum() / m.sum(), "[S1]"),
    (lambda z, m, n, w: z[m].mean() * w, "[S1]"),
    (lambda z, m, n, w: (z * m).sum() / n, "[S2]"),
    (lambda z, m, n, w: z.sum() / n * w, "padded positions"),
    (lambda z, m, n, w: (z * m).sum() / (n * w), "MULTIPLY"),
    (lambda z, m, n, w: (z * m).sum() * w, "divide by global_tokens"),
    (lambda z, m, n, w: (z * m).mean() * w, "every position"),
]


def rank_loss_where(token_losses, mask, global_tokens, world_size):
    return torch.where(mask, token_losses, 0).sum() / (global_tokens / world_size)


RANK_BATCH = [
    (lambda o, s, r, w, b: o[s * b:s * b + b], "[S3]"),
    (lambda o, s, r, w, b: o[s * b // w + r:s * b // w + b:w], "[S4]"),
    (lambda o, s, r, w, b: o[r:b:w], "move the start on"),
    (lambda o, s, r, w, b: o[s * b:(s + 1) * b][::w], "every rank took the same"),
    (lambda o, s, r, w, b: o[s * b + r:b:w], "ENDS at"),
    (lambda o, s, r, w, b: o[s * b:(s + 1) * b].chunk(w)[r], "round-robin"),
    # every rank the same part of the block: S3, never "a valid split"
    (lambda o, s, r, w, b: o[s * b:s * b + b // w], "[S3]"),
    (lambda o, s, r, w, b: o[s * b:(s + 1) * b].chunk(w)[0], "every rank took the same"),
    (lambda o, s, r, w, b: o[s * b:(s + 1) * b].view(-1, w)[:, 0], "[S3]"),
]


def rank_batch_by_view(order, step, rank, world_size, batch_size):
    block = order[step * batch_size:(step + 1) * batch_size]
    return block.view(-1, world_size)[:, rank]


def test_notebook_13_slips_are_named(run_check):
    _named(run_check, "rank_loss", RANK_LOSS, [rank_loss_where])
    _named(run_check, "rank_batch", RANK_BATCH, [rank_batch_by_view])


# ---- notebook 13: average_gradients (two processes per check: slow) -----------------------------

def returns_the_averages(model):
    world = dist.get_world_size()
    out = []
    for p in model.parameters():
        if p.grad is not None:
            g = p.grad.detach().clone()
            dist.all_reduce(g, op=dist.ReduceOp.SUM)
            out.append(g / world)
    return out


def reduces_a_flat_copy(model):
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat = flat / dist.get_world_size()


def does_nothing_useful(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            g = p.grad
            g = g / world


def reduces_the_weights(model):
    for p in model.parameters():
        dist.all_reduce(p.data, op=dist.ReduceOp.AVG)


def sums_only(model):
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)


def divides_only(model):
    for p in model.parameters():
        if p.grad is not None:
            p.grad.div_(dist.get_world_size())


def averages_with_avg(model):
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)


def copies_back(model):
    for p in model.parameters():
        if p.grad is not None:
            g = p.grad.clone()
            dist.all_reduce(g)
            p.grad.copy_(g / dist.get_world_size())


def frozen_all_reduced(model):  # no `if p.grad is not None`: a frozen parameter's is None
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()


def frozen_divided_first(model):
    for p in model.parameters():
        p.grad /= dist.get_world_size()
        dist.all_reduce(p.grad)


def frozen_flat(model):
    grads = [p.grad for p in model.parameters()]
    flat = torch.cat([g.flatten() for g in grads])
    dist.all_reduce(flat)
    for g, average in zip(grads, (flat / dist.get_world_size()).split([g.numel() for g in grads])):
        g.copy_(average.view_as(g))


@pytest.mark.slow
@pytest.mark.xdist_group("all-reduce check")
def test_average_gradients_slips_are_named(run_check):
    _named(run_check, "average_gradients", [
        (returns_the_averages, "you returned the averages"),
        (reduces_a_flat_copy, "you gave it a copy"),
        (does_nothing_useful, "your function changed no gradient"),
        (reduces_the_weights, "you all-reduced the weights"),
        (sums_only, "[S5]"),
        (divides_only, "without it each rank keeps"),
        (frozen_all_reduced, "a frozen parameter (requires_grad=False) gets no gradient"),
        (frozen_divided_first, "Skip it, `if p.grad is not None:`"),
        (frozen_flat, "its p.grad is None"),
    ], [averages_with_avg, copies_back])


@pytest.mark.parametrize("error, kind", [(ValueError("bad"), ValueError),
                                         (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad"),
                                          RuntimeError)])
def test_an_error_of_a_rank_is_sent_back_whatever_its_constructor(error, kind):
    """A learner's error is rebuilt in its process to be sent back; a builtin type whose
    constructor takes more than a message (UnicodeDecodeError) comes back as a RuntimeError
    naming it, instead of failing the rebuild and losing the rank's results."""
    from helpers.exercises.nb13 import _sent_back

    try:
        raise error
    except Exception as raised:  # noqa: BLE001 (any error a learner's function raises)
        sent = _sent_back(raised, nn.Linear(2, 2))
    assert type(sent) is kind and type(error).__name__ in f"{type(sent).__name__}: {sent}"
