"""Notebook 10's exercises: one step of beam search (``beam_step``), the
length-penalised score (``length_penalized_score``), with the decoding bugs D1 and D2 as buggy
variants, the whole of greedy decoding (``greedy_decode``, D5-D7) on a small model, and the
KV cache's decoder layer (``kv_cache_decode``: cached == uncached, D8, D9), and the whole of
beam search (``beam_search``: D1, D2, D10, D11). The buggy whole decoders, and the small random
model the cases decode with, are in ``nb10_variants.py``.
"""

import math
from dataclasses import dataclass

import torch

from .. import decoding
from ..decoding import (
    KVCache,
    beam_search,
    cached_decoder_layer,
    eval_mode,
    greedy_decode,
)
from ..masks import padding_mask
from .engine import Case, Exercise, NumberCase, Pitfall, randn
from .nb10_variants import BeamCase, beam_with, cached_layer_with, greedy_with, small_model

# ----------------------------------------------------------------------------------------------
# References (shown by solution())
# ----------------------------------------------------------------------------------------------

def beam_step(sums: torch.Tensor, log_probs: torch.Tensor, finished: torch.Tensor,
              beam_size: int, eos_id: int):
    """One step of beam search over ``n`` hypotheses: the ``beam_size`` best continuations.

    ``sums (n,)`` are the hypotheses' summed log-probabilities, ``log_probs (n, V)`` the model's
    next-token log-probabilities, ``finished (n,)`` True where a hypothesis already ended with
    EOS: it is not extended, it competes as it is (token ``eos_id``, score unchanged). Returns
    ``(rows, tokens, scores)``, each ``(beam_size,)``, best first: which hypothesis each
    candidate extends, the token it adds and its new summed log-probability. The best are
    chosen over all ``n * V`` candidates at once, not per hypothesis.
    """
    candidates = sums[:, None] + log_probs  # (n, V): log p(prefix) + log p(token | prefix)
    stay = torch.full_like(log_probs, float("-inf"))
    stay[:, eos_id] = sums  # a finished hypothesis has one candidate: itself
    candidates = torch.where(finished[:, None], stay, candidates)
    scores, index = candidates.flatten().topk(beam_size)  # (n * V,) -> (beam_size,), sorted
    V = log_probs.shape[-1]
    return index // V, index % V, scores


def length_penalized_score(log_probs: torch.Tensor, alpha: float) -> torch.Tensor:
    """``sum(log p) / L ** alpha`` for the ``L`` token log-probabilities of one hypothesis
    (EOS included). ``alpha = 0`` is the plain sum, ``alpha = 1`` the mean log-probability."""
    return log_probs.sum() / log_probs.shape[-1] ** alpha


# ----------------------------------------------------------------------------------------------
# Buggy variants, each with the learner's signature
# ----------------------------------------------------------------------------------------------

def _beam_candidates(sums, log_probs, finished, eos_id, extend_finished=False,
                     drop_finished=False):
    candidates = sums[:, None] + log_probs
    if extend_finished:
        return candidates
    stay = torch.full_like(log_probs, float("-inf"))
    if not drop_finished:
        stay[:, eos_id] = sums
    return torch.where(finished[:, None], stay, candidates)


def _beam_pick(candidates, beam_size):
    scores, index = candidates.flatten().topk(beam_size)
    V = candidates.shape[-1]
    return index // V, index % V, scores


def _beam_probabilities_added(sums, log_probs, finished, beam_size, eos_id):
    """D1: probabilities added instead of log-probabilities."""
    probs = sums.exp()[:, None] + log_probs.exp()
    stay = torch.full_like(probs, float("-inf"))
    stay[:, eos_id] = sums.exp()
    return _beam_pick(torch.where(finished[:, None], stay, probs), beam_size)


def _beam_probabilities_multiplied(sums, log_probs, finished, beam_size, eos_id):
    """D1: probabilities multiplied: the right order until they underflow to 0."""
    probs = sums.exp()[:, None] * log_probs.exp()
    stay = torch.full_like(probs, float("-inf"))
    stay[:, eos_id] = sums.exp()
    return _beam_pick(torch.where(finished[:, None], stay, probs), beam_size)


def _beam_log_probs_multiplied(sums, log_probs, finished, beam_size, eos_id):
    """D1: log-probabilities multiplied, as if they were probabilities."""
    candidates = sums[:, None] * log_probs
    stay = torch.full_like(log_probs, float("-inf"))
    stay[:, eos_id] = sums
    return _beam_pick(torch.where(finished[:, None], stay, candidates), beam_size)


def _beam_extends_finished(sums, log_probs, finished, beam_size, eos_id):
    """D2: finished hypotheses extended like the others."""
    return _beam_pick(_beam_candidates(sums, log_probs, finished, eos_id, True), beam_size)


def _beam_drops_finished(sums, log_probs, finished, beam_size, eos_id):
    """D2: finished hypotheses dropped."""
    return _beam_pick(_beam_candidates(sums, log_probs, finished, eos_id, drop_finished=True),
                      beam_size)


def _beam_per_hypothesis(sums, log_probs, finished, beam_size, eos_id):
    """The best continuations of each hypothesis on its own (ceil(beam_size / n) each)."""
    candidates = _beam_candidates(sums, log_probs, finished, eos_id)
    n, V = candidates.shape
    scores, tokens = candidates.topk(min(-(-beam_size // n), V), dim=-1)  # (n, per_row)
    rows = torch.arange(n)[:, None].expand_as(tokens)
    order = scores.flatten().argsort(descending=True)[:beam_size]
    return rows.flatten()[order], tokens.flatten()[order], scores.flatten()[order]


def _beam_not_cumulative(sums, log_probs, finished, beam_size, eos_id):
    """The new token's log-probability alone, without the hypothesis' sum."""
    zeros = torch.zeros_like(sums)
    return _beam_pick(_beam_candidates(zeros, log_probs, finished, eos_id), beam_size)


def _score_with(reduce):
    def score(log_probs, alpha):
        return reduce(log_probs, alpha, log_probs.shape[-1])
    return score


# ----------------------------------------------------------------------------------------------
# Test cases
# ----------------------------------------------------------------------------------------------

def _beam_step_cases(g):
    def case(label, sums, V, finished, beam_size, eos_id=2, spread=2.0):
        sums = torch.tensor(sums)
        log_probs = (spread * randn(g, len(sums), V)).log_softmax(dim=-1)
        return Case(f"{label}; n={len(sums)}, V={V}, beam_size={beam_size}",
                    (sums, log_probs, torch.tensor(finished), beam_size, eos_id))

    return [
        case("the first step (one hypothesis, sum 0)", [0.0], 9, [False], 3),
        case("three hypotheses, none finished", [-0.5, -1.0, -4.0], 8, [False] * 3, 3),
        case("one hypothesis far ahead of the others", [-0.1, -6.0, -7.0], 7, [False] * 3, 3,
             spread=0.5),
        case("a finished hypothesis with the best score", [-1.0, -2.0, -2.5], 6,
             [True, False, False], 3),
        case("long hypotheses (sums near -800: probabilities underflow)",
             [-800.0, -801.0], 7, [False, False], 4),
    ]


def _length_penalty_cases(g):
    def case(label, L, alpha, scale=1.5):
        log_probs = (scale * randn(g, L, 10)).log_softmax(dim=-1)[:, 0]  # (L,) all <= 0
        return NumberCase(f"{label}: L={L}, alpha={alpha}", (log_probs, alpha))

    return [
        case("a short hypothesis", 5, 0.6),
        case("alpha = 0: the plain sum", 6, 0.0),
        case("alpha = 1: the mean", 4, 1.0),
        case("one token", 1, 0.6),
        case("a long hypothesis (the product of probabilities underflows)", 400, 0.7, scale=6.0),
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

    def run(self, layer_fn):
        model, src, tokens, src_mask = self.args
        T = tokens.shape[1]
        chunks = [tokens[:, :self.prefill]] + [tokens[:, t:t + 1] for t in range(self.prefill, T)]
        logits = []
        with eval_mode(model):
            memory = model.encode(src, src_mask)
            cache = KVCache(len(model.decoder.layers))
            for chunk in chunks:
                x = model.tgt_embed(chunk) * math.sqrt(model.d_model)
                x = model.positional(x, start=cache.length)  # positions count on
                for i, layer in enumerate(model.decoder.layers):
                    x = layer_fn(layer, x, memory, src_mask, cache, i)
                    if not torch.is_tensor(x):
                        return x  # None, a string...: reported as it is
                cache.length += chunk.shape[1]
                logits.append(model.generator(x))  # (B, len(chunk), V)
        return torch.cat(logits, dim=1)


def _kv_cases(g):
    def case(label, seed, batch=2, steps=6, prefill=1, layers=2):
        model, src = small_model(seed, (batch, 5), eos_bias=0.0, layers=layers)
        tokens = torch.randint(3, 12, (batch, steps), generator=g)
        src[-1, 3:] = 0  # the last source sentence is padded
        tokens[:, 0] = 1  # BOS first
        return _CachedDecodingCase(label, (model, src, tokens, padding_mask(src, 0)),
                                   prefill=prefill)

    return [
        case("2 layers, 6 tokens one at a time", 0),
        case("3 tokens at once (a prefill), then 3 one at a time", 1, prefill=3),
        case("one layer, one sentence, 4 tokens", 2, batch=1, steps=4, layers=1),
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
        outputs=("rows", "tokens", "scores"),
        pitfalls=(
            Pitfall("D1", "probabilities added", _beam_probabilities_added, _HINT_D1),
            Pitfall("D1", "probabilities multiplied", _beam_probabilities_multiplied,
                    "multiplying probabilities is right in theory, but after a few hundred tokens "
                    "the products underflow to 0 and every candidate ties: " + _HINT_D1),
            Pitfall("D1", "log-probabilities multiplied", _beam_log_probs_multiplied,
                    "log turns products into sums: log p(prefix + token) = sums + log_probs, "
                    "not sums * log_probs."),
            Pitfall("D2", "finished hypotheses extended", _beam_extends_finished,
                    "a finished hypothesis (it ended with EOS) must not grow: it competes as it "
                    "is, with one candidate (token eos_id, score unchanged)."),
            Pitfall("D2", "finished hypotheses dropped", _beam_drops_finished,
                    "do not throw finished hypotheses away: they compete as they are (token "
                    "eos_id, score unchanged), and may well be the best."),
            Pitfall(None, "best continuations per hypothesis", _beam_per_hypothesis,
                    "choose the beam_size best candidates over ALL n * V continuations at once "
                    "(flatten, then topk): one strong hypothesis may supply several of them."),
            Pitfall(None, "scores not cumulative", _beam_not_cumulative,
                    "a candidate's score is the hypothesis' sum PLUS the new token's "
                    "log-probability (sums[:, None] + log_probs), not the new token's alone."),
        ),
    ),
    "length_penalized_score": Exercise(
        reference=length_penalized_score,
        make_cases=_length_penalty_cases,
        sources=(length_penalized_score,),
        outputs=("score",),
        pitfalls=(
            Pitfall("D1", "probabilities summed",
                    _score_with(lambda lp, a, L: lp.exp().sum() / L ** a), _HINT_D1),
            Pitfall("D1", "probabilities multiplied",
                    _score_with(lambda lp, a, L: lp.exp().prod() / L ** a),
                    "the product of probabilities underflows to 0 for long hypotheses: "
                    + _HINT_D1),
            Pitfall(None, "no length penalty", _score_with(lambda lp, a, L: lp.sum()),
                    "divide the sum by L ** alpha (L tokens, EOS included): only alpha = 0 leaves "
                    "the plain sum."),
            Pitfall(None, "multiplied by the length",
                    _score_with(lambda lp, a, L: lp.sum() * L ** a),
                    "divide by L ** alpha: the sum is negative and grows with L, and dividing is "
                    "what lifts long hypotheses."),
            Pitfall(None, "always the mean", _score_with(lambda lp, a, L: lp.sum() / L),
                    "the exponent alpha matters: sum / L ** alpha (alpha = 1 only gives the "
                    "mean)."),
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
        ),
    ),
    "beam_search": Exercise(
        reference=beam_search,
        make_cases=_beam_cases,
        sources=(beam_search, decoding._beam_candidates, decoding._cannot_improve),
        outputs=("tokens", "scores"),
        pitfalls=(
            Pitfall("D1", "probabilities added", beam_with(probabilities=True), _HINT_D1),
            Pitfall("D2", "finished hypotheses dropped", beam_with(keep_finished=False),
                    "do not throw finished hypotheses away: set each one aside with its score "
                    "when it emits EOS, and rank them all at the end."),
            Pitfall("D10", "best candidates beam by beam", beam_with(per_beam=True),
                    "choose the best k among all beams' candidates at once (topk over the "
                    "flattened (n * V) scores), not the best of one beam, then the next."),
            Pitfall("D11", "length penalty left out of the ranking", beam_with(penalise=False),
                    "compare finished hypotheses with the same length penalty: score = sum of "
                    "log p / length ** length_penalty, for every finished hypothesis."),
        ),
    ),
}
