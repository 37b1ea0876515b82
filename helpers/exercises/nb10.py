"""Notebook 10's exercises, in its order: greedy decoding (``greedy_decode``, D5-D7) on a small
model, one step of beam search (``beam_step``: D1, D2, D10 and the rules of an ending), the
whole of beam search (``beam_search``: D1, D2, D10, D11) and the KV cache's decoder layer
(``kv_cache_decode``: cached == uncached, D8, D9). The buggy whole decoders, and the small
random model the cases decode with, are in ``nb10_variants.py``.
"""

import math
from dataclasses import dataclass

import torch

from ..decoding import (
    KVCache,
    beam_search,
    beam_step,
    cached_decoder_layer,
    eval_mode,
    greedy_decode,
)
from ..masks import padding_mask
from .engine import Case, Exercise, Pitfall, randn
from .nb10_variants import BeamCase, beam_with, cached_layer_with, greedy_with, small_model

# ----------------------------------------------------------------------------------------------
# beam_step: buggy variants with the learner's signature, and the cases
# ----------------------------------------------------------------------------------------------

def _ranked(scores, count, row=None):
    """The ``count`` best ``(row, token, score)`` of an ``(n, V)`` table (of its row ``row``
    only, if given), best first."""
    table = scores if row is None else scores[row:row + 1]
    top, index = table.flatten().topk(min(count, table.numel()))
    V = scores.shape[-1]
    return [(i // V if row is None else row, i % V, s)
            for s, i in zip(top.tolist(), index.tolist(), strict=True)]


def _step_with(scores=lambda sums, log_probs: sums[:, None] + log_probs, window=None,
               per_hypothesis=False, obey_last_step=True, eos_ends=True, eos_kept=True,
               rank_limit=True, ended_reversed=False, kept_limit=True, divmod_swapped=False,
               lists_swapped=False):
    """``beam_step`` with one mistake: another score (D1, or not cumulative), only the
    ``beam_size`` best looked at (``window``), the best of each hypothesis on its own (D10), the
    last step treated as any other, an EOS candidate left in the beam or dropped (D2), or an
    ending counted outside the ``beam_size`` best (``rank_limit=False``)."""

    def step(sums, log_probs, beam_size, eos_id, last_step=False):
        table = scores(sums, log_probs)  # (n, V)
        n = table.shape[0]
        if per_hypothesis:  # each hypothesis keeps its own best ceil(beam_size / n)
            ranked = sorted((c for row in range(n) for c in
                             _ranked(table, -(-beam_size // n), row)), key=lambda c: -c[2])
        else:
            ranked = _ranked(table, beam_size + n if window is None else window(beam_size, n))
        if divmod_swapped:  # row = index % n, token = index // n
            V = table.shape[1]
            ranked = [((r * V + t) % n, (r * V + t) // n, v) for r, t, v in ranked]
        last_step = last_step and obey_last_step
        ended, kept = [], []
        for rank, (row, token, s) in enumerate(ranked):
            if (token == eos_id and eos_ends) or last_step:
                if rank < beam_size or not rank_limit:
                    ended.append((row, token, s))
            elif token == eos_id and not eos_kept:
                continue  # D2: dropped, neither ended nor kept
            elif len(kept) < beam_size or not kept_limit:
                kept.append((row, token, s))
        ended = ended[::-1] if ended_reversed else ended
        return (kept, ended) if lists_swapped else (ended, kept)

    return step


@dataclass(frozen=True)
class _BeamStepCase(Case):
    """``beam_step``'s two lists of ``(row, token, sum)`` as tensors: for each list the
    ``(m, 2)`` rows and tokens, and the ``(m,)`` sums."""

    def run(self, fn):
        result = super().run(fn)
        try:
            ended, kept = result
            out = []
            for candidates in (ended, kept):
                triples = [(int(row), int(token), float(s)) for row, token, s in candidates]
                out.append(torch.tensor([t[:2] for t in triples], dtype=torch.long).reshape(-1, 2))
                out.append(torch.tensor([t[2] for t in triples], dtype=torch.float32))
        except (TypeError, ValueError, RuntimeError):
            return result  # None, a string, a tensor...: reported as it is
        return tuple(out)


def _beam_step_cases(g):
    def case(label, sums, log_probs, beam_size, last_step=False):
        n, V = log_probs.shape
        return _BeamStepCase(f"{label}; n={n}, V={V}, beam_size={beam_size}",
                             (torch.tensor(sums), log_probs, beam_size, 2),  # EOS is id 2
                             {"last_step": last_step})

    def table(n, V, spread=2.0, eos_shift=0.0):
        logits = spread * randn(g, n, V)
        logits[:, 2] += eos_shift  # EOS made less (or more) likely
        return logits.log_softmax(dim=-1)

    def by_hand(*rows):  # rows of probabilities -> log-probabilities
        return torch.tensor(rows).log()

    return [
        case("the first step (one hypothesis, sum 0)", [0.0], table(1, 9, eos_shift=-4.0), 3),
        case("three hypotheses, none ends", [-0.5, -1.0, -4.0], table(3, 8, eos_shift=-6.0), 3),
        case("one hypothesis far ahead of the others", [-0.1, -6.0, -7.0],
             table(3, 7, spread=0.5, eos_shift=-4.0), 3),
        # best first: row 1 + token 1, row 0 + EOS, row 0 + token 0, row 0 + token 3
        case("an <eos> among the 2 best: it ends, 2 others are kept", [-0.5, -0.3],
             by_hand([0.3, 0.05, 0.5, 0.1, 0.05], [0.01, 0.97, 0.01, 0.005, 0.005]), 2),
        # best first: row 0 + token 0, row 1 + token 1, row 1 + EOS, row 0 + token 1
        case("an <eos> ranked third, with beam_size 2", [-0.2, -0.4],
             by_hand([0.9, 0.03, 0.01, 0.03, 0.03], [0.05, 0.6, 0.3, 0.025, 0.025]), 2),
        case("the last step: the 3 best all end, whatever their token", [-0.5, -1.0, -1.5],
             table(3, 6, eos_shift=-1.0), 3, last_step=True),
        case("long hypotheses (sums near -800: probabilities underflow)", [-800.0, -801.0],
             table(2, 7, eos_shift=-6.0), 4),
    ]


_HINT_D1 = ("work with log-probabilities: a hypothesis' score is the SUM of its tokens' log p "
            "(the log of the product of probabilities), and log p(prefix) + log p(token | prefix) "
            "never underflows.")

# ----------------------------------------------------------------------------------------------
# greedy_decode: a small random model whose rows end at different steps
# ----------------------------------------------------------------------------------------------

def _greedy_cases(g):
    def case(label, seed, batch=4, max_len=8):
        model, src = small_model(seed, (batch, 5))  # rows end after 1 to 5 tokens
        src[-1, 3:] = 0  # the last sentence is padded (PAD id 0)
        return Case(label, (model, src, max_len, 1, 2, padding_mask(src, 0)))

    return [
        case("4 sentences that end after 5, 4, 3 and 1 tokens", 0),
        case("4 sentences that end after 3, 4, 2 and 2 tokens", 1),
        case("4 sentences that never end: cut at max_len = 8", 2),
        case("one sentence", 0, batch=1),
    ]


_HINT_D6 = ("after EOS a row only gets padding (EOS again, as helpers.decoding does), and "
            "decoding stops as soon as every row has finished.")

# ----------------------------------------------------------------------------------------------
# kv_cache_decode: the learner's cached decoder layer inside a decoding loop
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _CachedDecodingCase(Case):
    """Decodes ``tokens`` with the learner's layer function and a :class:`KVCache`: first
    ``prefill`` tokens at once, then one at a time. The answer is the logits ``(B, T, V)``,
    which must equal the uncached ``model.decode`` (teacher forcing)."""

    prefill: int = 1
    sizes: tuple = ()  # the sizes of the chunks after the prefill (default: 1 each)

    def run(self, layer_fn):
        model, src, tokens, src_mask = self.args
        T = tokens.shape[1]
        sizes = list(self.sizes) or [1] * (T - self.prefill)
        starts = [self.prefill + sum(sizes[:j]) for j in range(len(sizes))]
        chunks = [tokens[:, :self.prefill]] + [tokens[:, a:a + n]
                                               for a, n in zip(starts, sizes, strict=True)]
        logits = []
        layers = model.decoder.layers
        projected = [0] * len(layers)  # calls of each cross-attention's W_K
        hooks = [layer.cross_attn.w_k.register_forward_hook(
            lambda *_, i=i: projected.__setitem__(i, projected[i] + 1))
            for i, layer in enumerate(layers)]
        try:
            with eval_mode(model):
                memory = model.encode(src, src_mask)
                cache = KVCache(len(layers))
                for chunk in chunks:
                    x = model.tgt_embed(chunk) * math.sqrt(model.d_model)
                    x = model.positional(x, start=cache.length)  # positions count on
                    for i, layer in enumerate(layers):
                        x = layer_fn(layer, x, memory, src_mask, cache, i)
                        if not torch.is_tensor(x):
                            return x  # None, a string...: reported as it is
                        _check_cache_use(cache, i, cache.length + chunk.shape[1], projected[i])
                    cache.length += chunk.shape[1]
                    logits.append(model.generator(x))  # (B, len(chunk), V)
        finally:
            for hook in hooks:
                hook.remove()
        return torch.cat(logits, dim=1)


def _check_cache_use(cache, i, length, projections):
    """After layer ``i`` saw ``length`` positions in all: its cache holds their keys and values,
    and the memory's were projected once."""
    kv = cache.self_kv[i]
    if kv is None or not torch.is_tensor(kv[0]):
        raise ValueError(f"cache.self_kv[{i}] is empty after the call: store the keys and "
                         "values of every position so far there")
    if kv[0].dim() != 4 or kv[0].shape[2] != length:
        raise ValueError(f"cache.self_kv[{i}] holds keys of shape {tuple(kv[0].shape)} after "
                         f"{length} positions; expected (B, h, {length}, d_k)")
    if cache.cross_kv[i] is None:
        raise ValueError(f"cache.cross_kv[{i}] is empty after the call: project the memory's "
                         "keys and values once, into it, then reuse them")
    if projections > 1:
        raise ValueError(f"layer {i} projected the memory's keys {projections} times: "
                         f"project them once, into cache.cross_kv[{i}], then reuse them")


def _kv_cases(g):
    def case(label, seed, batch=2, steps=6, prefill=1, layers=2, sizes=()):
        model, src = small_model(seed, (batch, 5), eos_bias=0.0, layers=layers)
        tokens = torch.randint(3, 12, (batch, steps), generator=g)
        src[-1, 3:] = 0  # the last source sentence is padded
        tokens[:, 0] = 1  # BOS first
        return _CachedDecodingCase(label, (model, src, tokens, padding_mask(src, 0)),
                                   prefill=prefill, sizes=sizes)

    return [
        case("2 layers, 6 tokens one at a time", 0),
        case("3 tokens at once (a prefill), then 3 one at a time", 1, prefill=3),
        case("one layer, one sentence, 4 tokens", 2, batch=1, steps=4, layers=1),
        case("2 tokens, then 3 at once after them, then 1", 3, prefill=2, sizes=(3, 1)),
    ]


# ----------------------------------------------------------------------------------------------
# beam_search: whole searches on small random models, hypotheses ending at many lengths
# ----------------------------------------------------------------------------------------------

def _beam_cases(g):
    def case(label, seed, beam_size, alpha=0.0, bias=1.0, max_len=6):
        model, src = small_model(seed, (1, 5), bias)  # hypotheses end at many lengths
        return BeamCase(label, (model, src, beam_size, max_len, 1, 2),
                         {"length_penalty": alpha})

    return [
        case("width 3, no length penalty", 0, 3),
        case("width 3, length penalty 0.6", 1, 3, alpha=0.6),
        case("width 2, length penalty 1.0", 2, 2, alpha=1.0),
        case("width 4, EOS rarely likely", 3, 4, bias=0.0),
    ]


EXERCISES: dict[str, Exercise] = {
    "beam_step": Exercise(
        reference=beam_step,
        make_cases=_beam_step_cases,
        sources=(beam_step,),
        outputs=("ended (row, token)", "ended sums", "kept (row, token)", "kept sums"),
        pitfalls=(
            Pitfall("D1", "probabilities added",
                    _step_with(lambda sums, lp: sums.exp()[:, None] + lp.exp()), _HINT_D1),
            Pitfall("D1", "probabilities multiplied",
                    _step_with(lambda sums, lp: sums.exp()[:, None] * lp.exp()),
                    "multiplying probabilities is right in theory, but after a few hundred tokens "
                    "the products underflow to 0 and every candidate ties: " + _HINT_D1),
            Pitfall("D1", "log-probabilities multiplied",
                    _step_with(lambda sums, lp: sums[:, None] * lp),
                    "log turns products into sums: log p(prefix + token) = sums + log_probs, "
                    "not sums * log_probs."),
            Pitfall("D2", "an ending kept in the beam", _step_with(eos_ends=False),
                    "a candidate whose token is eos_id is a finished translation: it goes to "
                    "ended (if among the beam_size best), never into kept, where it would grow "
                    "past its end."),
            Pitfall("D2", "endings dropped", _step_with(eos_ends=False, eos_kept=False),
                    "do not throw the candidates that end with eos_id away: those among the "
                    "beam_size best go to ended, and may well be the best translation."),
            Pitfall("D10", "best candidates per hypothesis", _step_with(per_hypothesis=True),
                    "rank the candidates of all hypotheses together (flatten the (n, V) table, "
                    "then topk): one strong hypothesis may supply every survivor."),
            Pitfall(None, "sums not cumulative",
                    _step_with(lambda sums, lp: lp),
                    "a candidate's sum is its hypothesis' sum PLUS the new token's "
                    "log-probability (sums[:, None] + log_probs), not the new token's alone."),
            Pitfall(None, "only the beam_size best looked at",
                    _step_with(window=lambda beam_size, n: beam_size),
                    "the beam must still get beam_size hypotheses when some of the best "
                    "candidates end: look further down the ranking than beam_size (at most n "
                    "candidates can end, one per hypothesis)."),
            Pitfall(None, "an ending outside the beam_size best", _step_with(rank_limit=False),
                    "a candidate that ends counts only if it is among the beam_size best "
                    "candidates of all: one ranked lower would have been pruned."),
            Pitfall(None, "ended worst first", _step_with(ended_reversed=True),
                    "return both lists best first, in the order of the ranking."),
            Pitfall(None, "kept not limited", _step_with(kept_limit=False),
                    "kept holds at most beam_size candidates, the best ones that do not end: "
                    "it is the next beam."),
            Pitfall(None, "divmod swapped", _step_with(divmod_swapped=True),
                    "an index i of the flattened (n, V) table is row i // V, token i % V: "
                    "divmod(i, V)."),
            Pitfall(None, "the two lists swapped", _step_with(lists_swapped=True),
                    "return (ended, kept): the finished candidates first, then the next beam."),
            Pitfall(None, "the last step treated as any other", _step_with(obey_last_step=False),
                    "at the last step (last_step=True) every candidate ends, whatever its token: "
                    "the beam_size best go to ended, and kept is empty."),
        ),
    ),
    "greedy_decode": Exercise(
        reference=greedy_decode,
        make_cases=_greedy_cases,
        sources=(greedy_decode,),
        outputs=("tokens",),
        pitfalls=(
            Pitfall("D5", "the first position's logits", greedy_with(position=0),
                    "the next token comes from the last position's logits, logits[:, -1]: "
                    "position 0 always predicts the first word."),
            Pitfall("D6", "no padding after EOS", greedy_with(pad_after_eos=False), _HINT_D6),
            Pitfall("D6", "no early stop", greedy_with(stop_early=False), _HINT_D6),
            Pitfall("D6", "rows padded with 0 after EOS", greedy_with(fill=0),
                    "after EOS a row gets eos_id again (as helpers.decoding does), not 0: "
                    "token.masked_fill(finished, eos_id)."),
            Pitfall(None, "stops when any row ends", greedy_with(stop_any=True),
                    "stop when every row has produced eos_id (finished.all()), not when the "
                    "first one does: the other rows are not done."),
            Pitfall("D4", "no padding mask", greedy_with(mask=False),
                    "pass src_mask to model.encode and to every model.decode: without it the "
                    "padded sentence reads its pads, and its translation depends on the batch."),
            Pitfall(None, "a step short", greedy_with(extra_steps=-1),
                    "run up to max_len steps: for _ in range(max_len) appends max_len tokens to a "
                    "row that never ends, (B, 1 + max_len) in all."),
            Pitfall(None, "the newest token alone", greedy_with(last_only=True),
                    "without a cache, feed model.decode all the tokens so far, ys, not only the "
                    "newest: the decoder needs the whole prefix (the KV cache of section 6 is "
                    "what lets a step feed one token)."),
            Pitfall(None, "argmin", greedy_with(argmin=True),
                    "take the most likely token: argmax over the vocabulary, not argmin."),
            Pitfall("D7", "BOS dropped", greedy_with(keep_bos=False),
                    "the output starts with BOS, like the decoder's input: return the whole "
                    "(B, 1 + steps) tensor."),
        ),
    ),
    "kv_cache_decode": Exercise(
        reference=cached_decoder_layer,
        make_cases=_kv_cases,
        sources=(cached_decoder_layer,),
        outputs=("logits",),
        pitfalls=(
            Pitfall("D8", "cache replaced, not extended", cached_layer_with(extend=False),
                    "append the new keys and values to the cache (torch.cat along the positions, "
                    "dim=2): replacing them lets each new token see only itself."),
            Pitfall("D9", "no look-ahead mask among new tokens", cached_layer_with(
                mask_new=False),
                    "the new token may see every stored position, but several new tokens at once "
                    "(a prefill) see each other causally: mask with the last T rows of "
                    "causal_mask(t + T)."),
            Pitfall("D9", "the look-ahead mask's first rows", cached_layer_with(mask="first"),
                    "the new tokens are the LAST T of the t + T positions: take the last T rows "
                    "of the look-ahead mask, causal_mask(t + T)[None, None, t:]."),
            Pitfall("D9", "a (T, T) look-ahead mask", cached_layer_with(mask="square"),
                    "the new tokens' queries meet the keys of all t + T positions: the mask is "
                    "(1, 1, T, t + T), the last T rows of causal_mask(t + T)."),
            Pitfall("D12", "a 2-D look-ahead mask", cached_layer_with(mask="2d"),
                    "give the mask four axes, (1, 1, T, t + T): causal_mask(t + T)[None, None, t:] "
                    "(the course's attention refuses a 2-D mask, which could pass for a (B, L) "
                    "padding mask)."),
            Pitfall("D8", "keys never stored", cached_layer_with(store=False),
                    "store the keys and values in cache.self_kv[i] = (k, v), the earlier "
                    "positions' and the new ones': the next call reads them there."),
            Pitfall("D13", "the memory projected at every call", cached_layer_with(
                cross="every call"),
                    "project the memory's keys and values once, at the first call, into "
                    "cache.cross_kv[i], and reuse them at every later call: that is half of "
                    "what the cache saves."),
            Pitfall(None, "the memory projected with the self-attention's weights",
                    cached_layer_with(cross="self"),
                    "the memory's keys and values come from the cross-attention's projections: "
                    "_keys_values(layer.cross_attn, memory)."),
            Pitfall("D4", "no memory mask", cached_layer_with(memory_mask=False),
                    "pass memory_mask to the cross-attention: without it the new tokens read "
                    "the padded source positions."),
            Pitfall(None, "extended along another axis", cached_layer_with(dim=1),
                    "the positions are axis 2 of the (B, h, t, d_k) keys and values: torch.cat "
                    "along dim=2."),
            Pitfall("L2", "no residual around the self-attention",
                    cached_layer_with(residual=False),
                    "keep the layer's residual paths: norm1(x + self_attention(x)), as "
                    "DecoderLayer does (post-norm here)."),
        ),
    ),
    "beam_search": Exercise(
        reference=beam_search,
        make_cases=_beam_cases,
        sources=(beam_search, beam_step),  # _cannot_improve is given (section 3.4), not asked
        outputs=("tokens", "scores"),
        pitfalls=(
            Pitfall("D1", "probabilities added", beam_with(probabilities=True), _HINT_D1),
            Pitfall("D2", "finished hypotheses dropped", beam_with(keep_finished=False),
                    "do not throw finished hypotheses away: set each one aside with its score "
                    "when it emits EOS, and rank them all at the end."),
            Pitfall("D10", "best candidates beam by beam", beam_with(per_beam=True),
                    "choose the best k among all beams' candidates at once (topk over the "
                    "flattened (n * V) scores), not the best of one beam, then the next."),
            Pitfall(None, "length without EOS", beam_with(length_offset=-1),
                    "the length in the penalty counts the <eos>: len(tokens) ** length_penalty, "
                    "with eos_id in tokens."),
            Pitfall(None, "BOS in the tokens", beam_with(keep_bos=True),
                    "leave <bos> out of a finished hypothesis' tokens: only the generated ids, "
                    "ending with eos_id."),
            Pitfall(None, "not sorted", beam_with(ranked=False),
                    "return the finished hypotheses best first: sorted by score, highest first."),
            Pitfall(None, "more than beam_size", beam_with(limit=False),
                    "return beam_size of them at most: the best beam_size finished hypotheses."),
            Pitfall(None, "no last step", beam_with(last_step=False),
                    "pass last_step=True to beam_step at step max_len: there every candidate "
                    "ends, so hypotheses that never reached eos_id are not lost."),
            Pitfall(None, "EOS left out of the tokens", beam_with(keep_eos=False),
                    "keep eos_id at the end of a finished hypothesis' tokens: it is a token the "
                    "model chose, and the length counts it."),
            Pitfall("D11", "length penalty left out of the ranking", beam_with(penalise=False),
                    "compare finished hypotheses with the same length penalty: score = sum of "
                    "log p / length ** length_penalty, for every finished hypothesis."),
        ),
    ),
}
