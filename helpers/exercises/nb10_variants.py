"""Notebook 10's buggy decoders, each with one classic mistake (the pitfalls of ``nb10.py``):
whole greedy decoding, a cached decoder layer and whole beam search; and the small random model
that the cases decode with.
"""

import math
from dataclasses import dataclass

import torch

from ..decoding import _attend, _keys_values, eval_mode
from ..masks import causal_mask
from ..model import TransformerConfig, build_model
from .engine import Case


def greedy_with(position=-1, pad_after_eos=True, stop_early=True, keep_bos=True, fill=None,
                stop_any=False, mask=True, extra_steps=0, last_only=False, argmin=False):
    """Greedy decoding (without a cache) with one mistake: the first position's logits (D5),
    finished rows not padded (or padded with 0) or decoding not stopped (D6), BOS left out of
    the output (D7), no padding mask (D4); or a stop when any row ends, a step short, the newest
    token fed alone without a cache, the argmin."""

    def greedy(model, src, max_len, bos_id, eos_id, src_mask=None):
        src_mask = src_mask if mask else None
        with eval_mode(model):
            memory = model.encode(src, src_mask)
            ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
            finished = torch.zeros(src.shape[0], dtype=torch.bool)
            for _ in range(max_len + extra_steps):
                logits = model.decode(ys[:, -1:] if last_only else ys, memory, src_mask)
                logits = logits[:, position]
                token = logits.argmin(dim=-1) if argmin else logits.argmax(dim=-1)
                if pad_after_eos:
                    token = token.masked_fill(finished, eos_id if fill is None else fill)
                ys = torch.cat([ys, token[:, None]], dim=1)
                finished |= token == eos_id
                if stop_early and (finished.any() if stop_any else finished.all()):
                    break
        return ys if keep_bos else ys[:, 1:]

    return greedy


def small_model(seed, src_shape, eos_bias=1.0, layers=1):
    """A seeded random Transformer (12 tokens, width 16) whose EOS (id 2) is made likelier by
    ``eos_bias``, so that sentences end after different numbers of tokens, and source ids
    ``src_shape`` (3 to 11); the global random state is untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        config = TransformerConfig(d_model=16, num_heads=2, num_layers=layers, d_ff=32,
                                   dropout=0.0)
        model = build_model(config, 12, 12).eval()
        with torch.no_grad():
            model.generator.bias[2] += eos_bias
        return model, torch.randint(3, 12, src_shape)


def cached_layer_with(extend=True, mask_new=True, mask="rows", store=True, cross="cached",
                      memory_mask=True, dim=2, residual=True):
    """``cached_decoder_layer`` with one mistake: the cache replaced by the new keys and values
    instead of extended (D8), no look-ahead mask among several new tokens (D9); or a 2-D mask, a
    (T, T) one, its first T rows instead of its last; the keys never stored; the memory's keys
    and values projected at every call, or with the self-attention's projections; no memory
    mask; the cache extended along another axis; no residual around the self-attention."""

    def layer_fn(layer, x, memory, memory_mask_, cache, i):
        def self_attention(y):
            k, v = _keys_values(layer.self_attn, y)  # (B, h, T, d_k)
            if extend and cache.self_kv[i] is not None:
                k = torch.cat([cache.self_kv[i][0], k], dim=dim)
                v = torch.cat([cache.self_kv[i][1], v], dim=dim)
            if store:
                cache.self_kv[i] = (k, v)
            t, T = k.shape[2], y.shape[1]
            full = causal_mask(t)
            chosen = {"rows": full[t - T:], "2d": full[t - T:], "first": full[:T],
                      "square": causal_mask(T)}[mask]
            chosen = chosen if mask_new else None
            chosen = chosen[None, None] if chosen is not None and mask != "2d" else chosen
            if mask == "2d":
                chosen = full[t - T:]
            return _attend(layer.self_attn, y, k, v, chosen)

        def cross_attention(y):
            projections = layer.self_attn if cross == "self" else layer.cross_attn
            if cross == "every call":
                kv = _keys_values(projections, memory)
            else:
                if cache.cross_kv[i] is None:
                    cache.cross_kv[i] = _keys_values(projections, memory)
                kv = cache.cross_kv[i]
            return _attend(layer.cross_attn, y, *kv, memory_mask_ if memory_mask else None)

        h = self_attention(x)
        x = layer.norm1(x + h if residual else h)  # the cases' model is post-norm
        x = layer.norm2(x + cross_attention(x))
        return layer.norm3(x + layer.feed_forward(x))

    return layer_fn


def beam_with(probabilities=False, keep_finished=True, per_beam=False, penalise=True,
              length_offset=0, keep_bos=False, ranked=True, limit=True, last_step=True,
              keep_eos=True):
    """Beam search with one mistake: probabilities added instead of log-probabilities (D1),
    finished hypotheses thrown away (D2), candidates taken beam by beam instead of best overall
    (D10), finished hypotheses ranked without the length penalty (D11)."""

    def search(model, src, beam_size, max_len, bos_id, eos_id, src_mask=None,
               length_penalty=0.0):
        finished, alpha = [], length_penalty if penalise else 0.0
        with eval_mode(model):
            memory = model.encode(src, src_mask)
            tokens, sums = torch.full((1, 1), bos_id, dtype=torch.long), torch.zeros(1)
            for step in range(1, max_len + 1):
                n = tokens.shape[0]
                log_probs = model.decode(tokens, memory.expand(n, -1, -1), src_mask)[:, -1]
                log_probs = log_probs.log_softmax(dim=-1)  # (n, V)
                V = log_probs.shape[-1]
                scores = (sums.exp()[:, None] + log_probs.exp() if probabilities
                          else sums[:, None] + log_probs)  # (n, V)
                top, index = scores.flatten().topk(min(beam_size + n, n * V))
                if per_beam:  # each beam's best, beam by beam
                    per_row = scores.topk(min(beam_size + n, V), dim=-1)
                    top = per_row.values.flatten()
                    index = (per_row.indices + V * torch.arange(n)[:, None]).flatten()
                keep_rows, keep_tokens, keep_sums = [], [], []
                for rank, (s, i) in enumerate(zip(top.tolist(), index.tolist(), strict=True)):
                    row, token = divmod(i, V)
                    hypothesis = tokens[row, 0 if keep_bos else 1:].tolist() + [token]
                    if token == eos_id or (step == max_len and last_step):
                        if rank < beam_size and (keep_finished or step == max_len):
                            length = step + length_offset
                            if token == eos_id and not keep_eos:
                                hypothesis = hypothesis[:-1]
                            finished.append((hypothesis,
                                             s / length ** alpha if length else s))
                    elif len(keep_rows) < beam_size:
                        keep_rows.append(row)
                        keep_tokens.append(token)
                        keep_sums.append(math.log(s) if probabilities else s)
                if not keep_rows:
                    break
                tokens = torch.cat([tokens[keep_rows], torch.tensor(keep_tokens)[:, None]], 1)
                sums = torch.tensor(keep_sums)
        if ranked:
            finished.sort(key=lambda pair: pair[1], reverse=True)
        return finished[:beam_size] if limit else finished

    return search


@dataclass(frozen=True)
class BeamCase(Case):
    """``beam_search``'s list of ``(tokens, score)`` as tensors: the tokens ``(k, L)`` padded
    with -1, the scores ``(k,)``."""

    def run(self, fn):
        result = super().run(fn)
        try:
            pairs = [(list(map(int, tokens)), float(score)) for tokens, score in result]
        except (TypeError, ValueError):
            return result  # None, a string, a tensor...: reported as it is
        width = max((len(t) for t, _ in pairs), default=0)
        return (torch.tensor([t + [-1] * (width - len(t)) for t, _ in pairs], dtype=torch.long),
                torch.tensor([score for _, score in pairs], dtype=torch.float32))
