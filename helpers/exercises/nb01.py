"""Notebook 01's exercises: ``masked_softmax`` and ``scaled_dot_product_attention``. A
masked-softmax slip reaches attention through its masking steps."""

import torch

from ..attention import scaled_dot_product_attention
from ..checks import check_scores_mask
from .cases import causal, randn, random_mask, slips
from .engine import Case, Exercise, Pitfall, slip


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the keys (last axis) where ``mask`` is True; a row with no allowed key -> 0.

    The same steps as inside ``scaled_dot_product_attention`` in helpers/attention.py.
    """
    check_scores_mask(mask, scores.shape, "masked_softmax")  # a clear error for a wrong mask
    blocked = ~mask  # True = may attend, so the blocked keys are where the mask is False
    # The most negative finite number, not -inf: a fully masked row then gives a finite
    # (uniform) softmax instead of 0/0 = NaN, and the last line turns it into zeros.
    scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)  # (..., Lq, Lk)
    weights = scores.softmax(dim=-1)  # each query's weights over the keys sum to 1
    return weights.masked_fill(blocked, 0.0)  # rows with no allowed key become all 0


_FILL = "scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)"
_ZERO, _MIN = "return weights.masked_fill(blocked, 0.0)", "torch.finfo(scores.dtype).min"
_SOFTMAX_SLIPS = slips(masked_softmax, (  # carried into attention below
    ("A3", "inverted mask", ("blocked = ~mask", "blocked = mask"), None),
    ("A2", "mask after softmax (zeros)", (_FILL, ""), None),
    ("A2", "mask after softmax (-inf)", [(_FILL, ""), ("0.0)", "float('-inf'))")], None),
    ("A4", "softmax over the queries", ("dim=-1", "dim=-2"), None),
    ("A4", "softmax over axis 1", ("dim=-1", "dim=1"), None),
    ("A4", "softmax over axis 2", ("dim=-1", "dim=2"), None),
    ("A5", "NaN for a fully masked row", [(_MIN, "float('-inf')"), (_ZERO, "return weights")],
     None),
    ("A5", "uniform weights for a fully masked row", [(_MIN, "-1e9"), (_ZERO, "return weights")],
     None),
    (None, "scores multiplied by the mask", (_FILL, "scores = scores * mask"), "a blocked "
     "score of 0 (scores * mask, or masked_fill with 0) still takes a share of the softmax, since "
     "e^0 = 1: fill blocked scores with torch.finfo(scores.dtype).min before the softmax."),
    (None, "softmax, zero, renormalise", [(_FILL, ""), (
        _ZERO, "weights = weights * mask\n    return weights / weights.sum(-1, True)")],
     "a softmax over every key, then renormalised, loses the allowed weights when a blocked key "
     "scores far above them (they underflow to 0): mask the scores before the softmax."),
    (None, "boolean indexing with a broadcast mask", [
        (_FILL, "scores = scores.clone()\n    scores[blocked] = " + _MIN),
        (_ZERO, "weights[blocked] = 0.0\n    return weights")],
     "scores[~mask] = ... needs a mask of the scores' exact shape, and masks here broadcast (size "
     "1 on shared axes): use scores.masked_fill(~mask, ...), which broadcasts."),
    (None, "-1e9 in float16", (_MIN, "-1e9"), "-1e9 does not fit in float16 (largest: 65504): "
     "fill with torch.finfo(scores.dtype).min, the right value for every dtype.")))

# Attention with its masking steps done by a masked-softmax slip (``names`` puts it in place).
_VIA_SOFTMAX = (
    ("scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)", "pass"),
    ("weights = scores.softmax(dim=-1)", "weights = masked_softmax(scores, torch.ones("
     "scores.shape, dtype=torch.bool) if mask is None else mask)"),
    ("weights = weights.masked_fill(~mask, 0.0)", "pass"))
_A1_SIZE = ("divide by the square root of the key dimension of one head, d_k = query.shape[-1] "
            "(the size of each query and key vector), not the size of the values or the number "
            "of keys.")
_SQRT = "/ math.sqrt(d_k)"
ATTENTION_SLIPS = slips(scaled_dot_product_attention, (  # notebook 03 carries them up
    ("A1", "no scaling", (_SQRT, ""), None),
    ("A1", "divided by d_k", (_SQRT, "/ d_k"), None),
    ("A1", "multiplied by sqrt(d_k)", (_SQRT, "* math.sqrt(d_k)"), "divide by the square root "
     "of the key dimension of one head: / math.sqrt(d_k), not * math.sqrt(d_k)."),
    ("A1", "scaled by sqrt(d_v)", ("= query.shape[-1]", "= value.shape[-1]"), _A1_SIZE),
    ("A1", "scaled by sqrt(Lk)", ("= query.shape[-1]", "= key.shape[-2]"), _A1_SIZE),
    (None, "the weights scaled after the softmax", [(_SQRT, ""), ("mixed =", "weights = weights "
                                                                 + _SQRT + "\n    mixed =")],
     "divide the scores by sqrt(d_k) before the softmax; dividing the weights afterwards leaves "
     "rows that no longer sum to 1."),
    ("A3", "inverted mask", ("d_k =", "mask = None if mask is None else ~mask\n    d_k ="), None),
    (None, "key.T", ("key.transpose(-2, -1)", "key.permute(*range(key.dim())[::-1])"),
     "key.T reverses every axis of a batch: swap only the last two with key.transpose(-2, -1), "
     "so that any number of leading axes works."),
    (None, "key.transpose(1, 2)", ("transpose(-2, -1)", "transpose(1, 2)"), "transpose(1, 2) "
     "swaps the last two axes of a 3-D key only; with heads, (B, h, L, d_k), it swaps h and L: "
     "use key.transpose(-2, -1)."),
    (None, "(weights, output)", ("mixed @ value, weights", "weights, mixed @ value"),
     "return the tuple in the order (output, weights)."),
    (None, "mask ignored", ("d_k =", "mask = None\n    d_k ="), "use the mask: fill the "
     "scores where it is False before the softmax (masked_softmax from section 3 does it)."),
)) + tuple(Pitfall(p.id, p.name, slip(scaled_dot_product_attention, *_VIA_SOFTMAX, names={
    "masked_softmax": p.variant}), p.hint) for p in _SOFTMAX_SLIPS[1:-1])


def _blocked_row(g):  # a random (1, 3, 4) mask where query 1 may attend to no key at all
    mask = random_mask(g, 1, 3, 4)
    mask[0, 1] = False
    return mask


def _attention_cases(g):
    def qkv(*sizes):  # (B, Lq, d_k), (B, Lk, d_k), (B, Lk, d_v); sizes = B, Lq, Lk, d_k, d_v
        *lead, lq, lk, d_k, d_v = sizes
        return randn(g, *lead, lq, d_k), randn(g, *lead, lk, d_k), randn(g, *lead, lk, d_v)

    return [
        Case("no mask", qkv(2, 3, 4, 8, 5)),
        Case("a random mask", (*qkv(2, 4, 5, 6, 6), random_mask(g, 2, 4, 5))),
        Case("4-D (B, h, L, d_k) inputs with a causal mask",
             (*qkv(2, 3, 4, 4, 8, 8), causal(4)[None, None])),
        Case("a fully masked row", (*qkv(1, 3, 4, 4, 2), _blocked_row(g))),
        Case("length 1", (*qkv(1, 1, 1, 2, 3), torch.ones(1, 1, 1, dtype=torch.bool))),
        # a blocked key with a huge score: masking after the softmax cannot hide it
        Case("a blocked key scoring far above the others",
             (torch.tensor([[[15.0], [1.0]]]), torch.tensor([[[1.0], [20.0], [-1.0]]]),
              randn(g, 1, 3, 2), torch.tensor([[[True, False, True], [True, False, True]]]))),
    ]


def _masked_softmax_cases(g):
    return [
        Case("a random mask", (2 * randn(g, 2, 3, 5), random_mask(g, 2, 3, 5))),
        Case("a causal mask broadcast over (B, h)", (2 * randn(g, 2, 2, 4, 4),
                                                    causal(4)[None, None])),
        Case("a (B, 1, 1, L) padding mask", (2 * randn(g, 2, 2, 3, 3), torch.tensor(
            [True, True, True, True, False, True]).view(2, 1, 1, 3))),
        Case("a fully masked row", (2 * randn(g, 1, 3, 4), _blocked_row(g))),
        Case("length 1", (randn(g, 1, 1, 1), torch.ones(1, 1, 1, dtype=torch.bool))),
        Case("a blocked key scoring far above the others",
             (torch.tensor([[[1.0, 2.0, 150.0], [0.5, 160.0, 0.0]]]),
              torch.tensor([[[True, True, False], [True, False, True]]]))),
        # float16, where -1e9 does not fit; weights 0, 1/2 and 1 are exact in any dtype
        Case("float16 scores with a fully masked row",
             (torch.tensor([[[1.0, 1.0, 5.0], [2.0, 0.0, 3.0], [0.5, 0.5, 0.5]]],
                           dtype=torch.float16),
              torch.tensor([[[True, True, False], [False, True, False], [False] * 3]]))),
    ]


EXERCISES: dict[str, Exercise] = {
    "scaled_dot_product_attention": Exercise(
        reference=scaled_dot_product_attention, make_cases=_attention_cases,
        outputs=("out", "weights"), sources=(scaled_dot_product_attention,),
        pitfalls=ATTENTION_SLIPS),
    "masked_softmax": Exercise(
        reference=masked_softmax, make_cases=_masked_softmax_cases, sources=(masked_softmax,),
        pitfalls=_SOFTMAX_SLIPS),
}
