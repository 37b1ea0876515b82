"""Notebook 03's exercises: ``split_heads``, ``merge_heads`` and ``multi_head_attention`` (its
``forward``), which also runs the split and merge slips and notebook 01's attention slips."""

import torch

from ..attention import MultiHeadAttention, merge_heads, scaled_dot_product_attention, split_heads
from .cases import causal, padded, randn, seeded, slips
from .engine import Case, Exercise, ModuleCase, Pitfall, slip
from .nb01 import ATTENTION_SLIPS

_QKV = "each input has its own projection: q = w_q(query), k = w_k(key), v = w_v(value)."
_SIDE = ("the heads go side by side (Concat), not summed or averaged: the result has h * d_k "
         "features per token.")
_T = "x.transpose(1, 2)"

# As a learner's own code runs: attention without its input checks (a 3-D mask for 4-D scores
# lines up from the right, B against h, instead of raising), and a merge that checks nothing.
_RAW = slip(scaled_dot_product_attention, ("check_attention_inputs(query, key, value, mask)",
                                           "pass"))
_RAW_MERGE = lambda query, x: x.transpose(1, 2).reshape(*query.shape[:2], -1)
SPLIT_SLIPS = slips(split_heads, (
    ("H1", "view(B, L, d_k, h)", ("num_heads, d_k)", "d_k, num_heads)"), None),
    ("H1", "view(B, L, d_k, h), heads moved forward",
     [("num_heads, d_k)", "d_k, num_heads)"), (_T, "x.permute(0, 3, 1, 2)")], None),
    ("H1", "view(B, h, L, d_k) without transpose", [("L, num_heads,", "num_heads, L,"), (_T, "x")],
     None),
    (None, "missing transpose", (_T, "x"), "after view(B, L, h, d_k), swap the L and h axes "
     "with transpose(1, 2) to get (B, h, L, d_k)."),
    (None, "transpose(1, 3)", (_T, "x.transpose(1, 3)"), "after view(B, L, h, d_k), swap the "
     "L and h axes, axes 1 and 2: transpose(1, 2). transpose(1, 3) swaps L with d_k."),
    (None, "d_k a float", ('head_size(d_model, num_heads, "split_heads")', "d_model / num_heads"),
     "d_model / num_heads is a float (6.0), and view needs whole numbers: "
     "d_k = d_model // num_heads.")))
MERGE_SLIPS = slips(merge_heads, (
    ("H2", "reshape without transposing back", ("x = " + _T, "pass"), None),
    (None, "view after transpose", ("x.reshape(", "x.view("), "after transpose the memory is no "
     "longer in order, so view fails: use .reshape(...) or .contiguous().view(...)."),
    (None, "d_k before h", (_T, "x.permute(0, 2, 3, 1)"), "put the axes in the order (B, L, h, "
     "d_k) before reshaping, with transpose(1, 2): d_k before h interleaves the heads' features."),
    (None, "transpose(2, 3)", (_T, "x.transpose(2, 3)"), "swap the head axis and the token axis, "
     "transpose(1, 2), to get (B, L, h, d_k); transpose(2, 3) swaps L and d_k."),
    (None, "heads summed", ("x.reshape(B, L, h * d_k)", "x.sum(dim=2)"), _SIDE),
    (None, "heads averaged", ("x.reshape(B, L, h * d_k)", "x.mean(dim=2)"), _SIDE)))

_ATTEND, _OUT = "out, weights = self.attend(q, k, v, mask,", "return self.w_o(merge_heads(out))"
_K, _V = "self.w_k(key)", "self.w_v(value)"
_UNSQUEEZED = ("the mask already has its four axes, (B or 1, 1, Lq or 1, Lk): pass it on as it "
               "is.")
MHA_SLIPS = slips(MultiHeadAttention, (
    ("A1", "sqrt(d_model)", [(_ATTEND, "out, weights = self.attend(q * (self.d_k / self.d_model)"
                                       " ** 0.5, k, v, mask,")], None),
    ("A6", "scaled twice", [(_ATTEND, "out, weights = self.attend(q / self.d_k ** 0.5, k, v, "
                                      "mask,")], None),
    ("H3", "no output projection", (_OUT, "return merge_heads(out)"), None),
    (None, "keys and values from query", [(_K, "self.w_k(query)"), (_V, "self.w_v(query)")],
     "take the keys from key and the values from value: in cross-attention they are another "
     "sequence than query."),
    (None, "key and value swapped", [(_K, "self.w_k(value)"), (_V, "self.w_v(key)")],
     "keys come from key (k = w_k(key)) and values from value (v = w_v(value)), not the other "
     "way round."),
    (None, "w_q for everything", [(_K, "self.w_q(key)"), (_V, "self.w_q(value)")], _QKV),
    (None, "w_k and w_v swapped", [(_K, "self.w_v(key)"), (_V, "self.w_k(value)")], _QKV),
    (None, "w_o before the merge", (_OUT, "return merge_heads(self.w_o(out))"),
     "merge the heads first, (B, h, Lq, d_k) -> (B, Lq, d_model), then apply w_o."),
    (None, "output and weights returned", (_OUT, _OUT + ", weights"),
     "forward returns the output (B, Lq, d_model) only, not (output, weights)."),
    (None, "the mask's head axis dropped", [(_ATTEND, "mask = mask if mask is None else mask[:, 0]"
                                                      "\n    " + _ATTEND)],
     "keep the mask's head axis, (B or 1, 1, Lq or 1, Lk): without it the batch axis lines up "
     "with the heads' axis, so sentence b's mask hides keys in head b."),
    (None, "mask unsqueezed", [(_ATTEND, "mask = mask if mask is None else mask[:, None]\n    "
                                         + _ATTEND)], _UNSQUEEZED)),
    ("check_mask(mask,", "(mask,"), ("self.attend(", "raw("), ("merge_heads(", "raw_merge(query, "),
    names={"raw": _RAW, "raw_merge": _RAW_MERGE})

_HEADS = ("split q, k and v into heads, (B, h, L, d_k), before the attention: on (B, L, "
          "d_model) it runs as one head of size d_model.")
_PASS_MASK = {"mask ignored": "pass the mask on to the attention: the checker's padding and "
              "look-ahead masks must hide keys."}
# Notebook 01's slips that show in multi-head attention (d_v = d_k, no empty rows) and differ
_CARRIED = {"no scaling", "inverted mask", "key.transpose(1, 2)", "mask ignored",
            "mask after softmax (zeros)", "softmax over the queries", "softmax over axis 1",
            "scores multiplied by the mask", "boolean indexing with a broadcast mask"}
CARRIED = (
    *(Pitfall(p.id, p.name, slip(MultiHeadAttention, names={"split_heads": p.variant}), p.hint)
      for p in SPLIT_SLIPS if p.name != "transpose(1, 3)"),  # shows as a missing transpose
    *(Pitfall(p.id, p.name, slip(MultiHeadAttention, names={"merge_heads": p.variant}), p.hint)
      for p in MERGE_SLIPS[:4]),  # summed or averaged heads: w_o before the merge shows alike
    Pitfall(None, "mask unsqueezed, checked", slip(MultiHeadAttention, (
        _ATTEND, "mask = mask if mask is None else mask[:, None]\n    " + _ATTEND)),
            _UNSQUEEZED),
    Pitfall(None, "one big head", slip(MultiHeadAttention, names={
        "split_heads": lambda x, h: x[:, None], "merge_heads": lambda x: x[:, 0]}), _HEADS),
    *(Pitfall(p.id, p.name, type("Slip", (MultiHeadAttention,), {
        "attend": staticmethod(p.variant)}), _PASS_MASK.get(p.name, p.hint))
      for p in ATTENTION_SLIPS if p.name in _CARRIED))


def _mha_cases(g):
    def case(label, d_model, heads, lq, lk=0, mask=None, batch=2):  # lk=0: self-attention
        query = randn(g, batch, lq, d_model)
        key = randn(g, batch, lk, d_model) if lk else query
        value = randn(g, batch, lk, d_model) if lk else query
        return ModuleCase(label, (query, key, value, mask), weights_of=MultiHeadAttention,
                          init={"d_model": d_model, "num_heads": heads})

    return [
        case("self-attention, d_model=24, 4 heads (d_k=6), no mask", 24, 4, 5),
        case("cross-attention, 3 queries, 6 keys, padding mask (B, 1, 1, 6)", 24, 4, 3, 6,
             padded(2, 6)),
        case("look-ahead mask (1, 1, 4, 4), d_model=16, 2 heads", 16, 2, 4, 0,
             causal(4)[None, None]),
        case("batch of 1, d_model=8, one head", 8, 1, 2, 3, batch=1),
        case("one query (Lq=1), 5 keys, d_model=24, 4 heads", 24, 4, 1, 5),
        case("2 sentences, 2 heads, padding mask (B, 1, 1, 6)", 16, 2, 3, 6, padded(2, 6)),
    ]


def _keeps_weights(cls) -> str | None:
    """The figures after the check plot ``attention_weights``: a right answer must keep them."""
    x = randn(torch.Generator().manual_seed(0), 2, 3, 8)
    theirs, ours = seeded(0, cls, 8, 2), seeded(0, MultiHeadAttention, 8, 2)
    ours.load_state_dict(theirs.state_dict())
    with torch.no_grad():
        theirs(x, x, x), ours(x, x, x)
    kept = getattr(theirs, "attention_weights", None)
    if torch.is_tensor(kept) and kept.shape == ours.attention_weights.shape and torch.allclose(
            kept, ours.attention_weights, atol=1e-5):
        return None
    return ("keep the heads' weights in `self.attention_weights`, shape (B, h, Lq, Lk), as the "
            "reference does: the heatmaps below plot them.")


EXERCISES: dict[str, Exercise] = {
    "split_heads": Exercise(
        reference=split_heads, sources=(split_heads,), pitfalls=SPLIT_SLIPS,
        make_cases=lambda g: [
            Case("d_model=24, h=4 (d_k=6 != h)", (randn(g, 2, 5, 24), 4)),
            Case("d_model=16, h=4 (d_k = h)", (randn(g, 2, 3, 16), 4)),
            Case("length 1", (randn(g, 1, 1, 8), 2)), Case("one head", (randn(g, 2, 4, 6), 1))]),
    "merge_heads": Exercise(
        reference=merge_heads, sources=(merge_heads,), pitfalls=MERGE_SLIPS,
        make_cases=lambda g: [
            Case("h=4, d_k=6", (randn(g, 2, 4, 5, 6),)),
            Case("h = d_k = 4", (randn(g, 2, 4, 3, 4),)),
            Case("length 1", (randn(g, 1, 2, 1, 3),)), Case("one head", (randn(g, 2, 1, 4, 8),))]),
    "multi_head_attention": Exercise(
        reference=MultiHeadAttention, make_cases=_mha_cases, sources=(MultiHeadAttention.forward,),
        pitfalls=(*MHA_SLIPS, *CARRIED), requires=_keeps_weights),
}
