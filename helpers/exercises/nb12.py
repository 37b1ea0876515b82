"""Notebook 12's exercises: the modern block's normalisation (``rms_norm``: G1), rotary
positions (``apply_rope``: G2) and the sampling filter (``filter_logits``: G3, G4).
"""

import torch

from ..gpt import apply_rope, filter_logits, rms_norm, rope_angles
from .engine import Case, Exercise, Pitfall, randn

# ----------------------------------------------------------------------------------------------
# Buggy variants
# ----------------------------------------------------------------------------------------------


def _rms_with_mean(x, weight, eps=1e-6):  # G1: LayerNorm's centring kept
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred / centred.pow(2).mean(dim=-1, keepdim=True).add(eps).sqrt() * weight


def _rope_halves(x, angles):  # G2: pairs (i, i + d/2), the "rotate half" layout
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    cos, sin = angles.cos(), angles.sin()
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


def _top_p_then_temperature(logits, temperature, top_p):  # G3
    return filter_logits(logits, 1.0, top_p=top_p) / temperature


def _top_p_without_crossing(logits, temperature, top_p):  # G4: strictly below top_p only
    logits = logits / temperature
    ordered, index = logits.sort(dim=-1, descending=True)
    ordered = ordered.masked_fill(ordered.softmax(-1).cumsum(-1) > top_p, float("-inf"))
    return torch.empty_like(logits).scatter_(-1, index, ordered)


def _filter(logits, temperature, top_p):
    """``filter_logits`` with temperature and top-p only: the learner's signature."""
    return filter_logits(logits, temperature, top_p=top_p)


# ----------------------------------------------------------------------------------------------
# Cases
# ----------------------------------------------------------------------------------------------

def _rms_cases(g):
    def gain(d):
        return 1 + 0.5 * randn(g, d)

    return [Case("random (2, 3, 8), mean 2", (2 + randn(g, 2, 3, 8), gain(8))),
            Case("d_model = 2", (randn(g, 4, 2), gain(2))),
            Case("eps = 0.1, small inputs", (0.2 * randn(g, 1, 5, 6), gain(6)), {"eps": 0.1}),
            Case("length 1", (3 * randn(g, 1, 1, 4), gain(4)))]


def _rope_cases(g):
    return [Case("(B=2, h=2, L=5, d_k=8)", (randn(g, 2, 2, 5, 8), rope_angles(5, 8))),
            Case("one vector, d_k = 4, position 7", (randn(g, 1, 4), rope_angles(8, 4)[7:])),
            Case("positions 3 to 8 (a KV cache's new tokens)",
                 (randn(g, 1, 6, 6), rope_angles(6, 6, start=3)))]


def _filter_cases(g):
    return [Case("8 tokens, temperature 0.5, top_p 0.9", (3 * randn(g, 2, 8), 0.5, 0.9)),
            Case("6 tokens, temperature 2, top_p 0.6", (2 * randn(g, 3, 6), 2.0, 0.6)),
            Case("one token of 0.6, top_p 0.5: the first token crosses",
                 (torch.tensor([[0.0, -1.0986, -1.0986, -10.0]]).log_softmax(-1), 1.0,
                  0.5)),
            Case("12 tokens, temperature 1, top_p 0.95", (randn(g, 1, 12), 1.0, 0.95))]


EXERCISES: dict[str, Exercise] = {
    "rms_norm": Exercise(
        reference=rms_norm,
        make_cases=_rms_cases,
        sources=(rms_norm,),
        pitfalls=(
            Pitfall("G1", "the mean subtracted", _rms_with_mean,
                    "RMSNorm does NOT subtract the mean: that is LayerNorm's first step, which "
                    "RMSNorm drops. Divide x itself by sqrt(mean(x^2) + eps)."),
            Pitfall(None, "eps outside the root",
                    lambda x, w, eps=1e-6: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * w,
                    "eps goes inside the square root, as in notebook 04 (pitfall N2) and "
                    "torch.nn.RMSNorm: sqrt(mean(x^2) + eps)."),
            Pitfall(None, "statistics over the wrong axis",
                    lambda x, w, eps=1e-6: x / x.pow(2).mean(0, keepdim=True).add(eps).sqrt() * w,
                    "each vector is normalised over its own features: the mean of x^2 over the "
                    "LAST axis (dim=-1), as LayerNorm's statistics (pitfall N4)."),
        ),
    ),
    "apply_rope": Exercise(
        reference=apply_rope,
        make_cases=_rope_cases,
        sources=(apply_rope,),
        pitfalls=(
            Pitfall("G2", "halves instead of adjacent pairs", _rope_halves,
                    "you rotated the pairs (x[i], x[i + d/2]), the layout of some libraries "
                    "('rotate half'). It is a valid choice when queries and keys agree, but the "
                    "course pairs ADJACENT features (x[2i], x[2i+1]), as notebook 02 "
                    "interleaves sine and cosine: angle i belongs to that pair."),
            Pitfall(None, "rotated the other way",
                    lambda x, a: apply_rope(x, -a),
                    "the rotation goes the other way: (x0, x1) -> (x0 cos - x1 sin, "
                    "x0 sin + x1 cos), a turn by +angle."),
        ),
    ),
    "filter_logits": Exercise(
        reference=_filter,
        make_cases=_filter_cases,
        sources=(filter_logits,),
        pitfalls=(
            Pitfall("G3", "top-p before the temperature", _top_p_then_temperature,
                    "divide by the temperature FIRST: the temperature reshapes the "
                    "distribution, and the nucleus (top-p) must be chosen on that new shape."),
            Pitfall("G4", "the crossing token dropped", _top_p_without_crossing,
                    "keep the token that crosses top_p: the nucleus is the smallest set of most "
                    "likely tokens whose probabilities reach top_p, so remove a token only when "
                    "the tokens ranked above it already reach top_p."),
        ),
    ),
}
