"""Notebook 07's exercises: ``shift_right``, ``cross_attention`` and ``DecoderLayer.forward``
(``decoder_layer``), with notebook 01's attention and notebook 04's residual slips carried in."""

import functools
import math

import torch

from ..attention import scaled_dot_product_attention
from ..layers import DecoderLayer
from ..masks import causal_mask
from .cases import exercise, padded, randn, slips
from .engine import Case, Exercise, Pitfall, slip
from .nb05 import POST_ALWAYS, PRE_ALWAYS, layer_case, no_skip


def shift_right(target: torch.Tensor, bos_id: int) -> torch.Tensor:
    """(B, T) target ids -> (B, T) decoder input: bos_id, then the target without its last token."""
    bos = torch.full_like(target[:, :1], bos_id)  # (B, 1), same dtype and device as target
    return torch.cat([bos, target[:, :-1]], dim=1)  # (B, 1) + (B, T - 1) -> (B, T)


def cross_attention(x: torch.Tensor, memory: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor,
                    w_v: torch.Tensor, memory_mask=None):
    """One head of the decoder's cross-attention (section 3.2.3), returning ``(out, weights)``.

    Queries from the decoder, keys and values from the encoder's output (the memory):
    ``x (B, T, d_model)``, ``memory (B, S, d_model)``, ``w_q``, ``w_k``, ``w_v (d_model, d_k)``,
    ``memory_mask`` None or bool ``(B, 1, S)``, True for a real source token. Returns ``out
    (B, T, d_k)`` and ``weights (B, T, S)``: one row per target position over the source.
    ``DecoderLayer.forward`` in helpers/layers.py does this for every head at once.
    """
    q = x @ w_q  # (B, T, d_k): what each target position is looking for
    k, v = memory @ w_k, memory @ w_v  # (B, S, d_k): what the source offers
    # No look-ahead mask here: the whole source is known from the start; only padding is hidden.
    return scaled_dot_product_attention(q, k, v, memory_mask)


# notebook 01's attention with one slip, carried into cross-attention
_FILL = "scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)"
MASK_AFTER_SOFTMAX = slip(scaled_dot_product_attention, (_FILL, "pass"))
INVERTED_BY_HAND = slip(scaled_dot_product_attention,
                        (_FILL, "scores = scores.masked_fill(mask, float('-inf'))"),
                        ("weights = weights.masked_fill(~mask, 0.0)", "pass"))

_KV = "memory @ w_k, memory @ w_v"
_MASKED = "v, memory_mask)"
_SOURCES = "q = x @ w_q from the decoder; k = memory @ w_k and v = memory @ w_v from the memory."
_CAUSAL = ("the look-ahead mask belongs to the decoder's self-attention only: every target "
           "position may read every real source token (use memory_mask alone).")
_TRIL = ("torch.ones({}q.shape[1], k.shape[1], dtype=torch.bool).tril()"
         " & (True if memory_mask is None else memory_mask))")
CROSS_PITFALLS = slips(cross_attention, [
    (None, "queries from the memory", [("q = x @", "q = memory @"), (_KV, "x @ w_k, x @ w_v")],
     "the arguments are swapped (silently, when S == T): " + _SOURCES),
    (None, "values from the decoder", ("memory @ w_v", "x @ w_v"),
     "the values come from the memory too, like the keys: " + _SOURCES),
    (None, "memory unused", [(_KV, "x @ w_k, x @ w_v"), (_MASKED, "v)")],
     "that is self-attention; cross-attention reads the encoder's memory: " + _SOURCES),
    (None, "memory mask ignored", (_MASKED, "v)"),
     "pass memory_mask to the attention, so that no target position reads source padding."),
    (None, "look-ahead mask on the memory", (_MASKED, "v, " + _TRIL.format("1, ")), _CAUSAL),
    (None, "2-D look-ahead mask on the memory", (_MASKED, "v, " + _TRIL.format("")), _CAUSAL),
    ("A3", "inverted memory mask",
     [(_MASKED, "v, None if memory_mask is None else ~memory_mask)")],
     "in this course True means may attend: pass memory_mask as it is, no ~."),
    ("A1", "scaled by sqrt(d_model)",
     [("q = x @ w_q", "q = x @ w_q * math.sqrt(w_q.shape[1] / x.shape[-1])")],
     "divide by the square root of the key dimension of one head: d_k = w_k.shape[1], not "
     "d_model = x.shape[-1]."),
    (None, "keys from the decoder", ("memory @ w_k", "x @ w_k"),
     "the keys come from the memory, like the values: " + _SOURCES),
    (None, "weights transposed",
     [("x @ w_q", "x @ w_q.T"), (_KV, "memory @ w_k.T, memory @ w_v.T")],
     "the weights are (d_model, d_k): use x @ w_q, with no .T."),
    (None, "no scaling", ("q = x @ w_q", "q = x @ w_q * math.sqrt(w_q.shape[1])"),
     "divide the scores by sqrt(d_k) before the softmax (scaled_dot_product_attention does)."),
]) + (
    Pitfall("A3", "inverted memory mask, by hand",
            slip(cross_attention, names={"scaled_dot_product_attention": INVERTED_BY_HAND}),
            "in this course True means may attend: hide the keys where memory_mask is False, "
            "masked_fill(~memory_mask, ...)."),
    Pitfall("A2", "mask after the softmax",
            slip(cross_attention, names={"scaled_dot_product_attention": MASK_AFTER_SOFTMAX})),
)


def _cross_attention_cases(g):
    def case(label, B, T, S, d_model, d_k, mask=False):  # mask: the last sentence ends 2 early
        x, memory = randn(g, B, T, d_model), randn(g, B, S, d_model)
        weights = [randn(g, d_model, d_k) / math.sqrt(d_model) * 2 for _ in range(3)]
        kwargs = {"memory_mask": padded(B, S)[:, 0]} if mask else {}  # (B, 1, S)
        return Case(label, (x, memory, *weights), kwargs)

    return [case("T = S = 4, no mask", 2, 4, 4, 8, 8),
            case("T=3, S=5, source padding (B, 1, S), d_k=4", 2, 3, 5, 8, 4, mask=True),
            case("T=5, S=2, no mask", 1, 5, 2, 6, 6),
            case("T = S = 4, source padding, d_k=4", 2, 4, 4, 8, 4, mask=True),
            case("one target position, S=6 with padding", 2, 1, 6, 8, 8, mask=True)]


_SELF, _CROSS = "self_attn(y, y, y, tgt_mask", "cross_attn(y, memory, memory, memory_mask"
_N1, _N2 = "self_attention, self.norm1", "cross_attention, self.norm2"
_N3 = "feed_forward, self.norm3"
_dec = functools.partial(slip, DecoderLayer)
DECODER_PITFALLS = (
    Pitfall("M5", "no look-ahead mask", _dec((_SELF, "self_attn(y, y, y, None"))),
    Pitfall("L4", "query and memory swapped",
            _dec(("cross_attn(y, memory, memory,", "cross_attn(memory, y, y,"))),
    Pitfall("L7", "cross-attention queries from x", _dec(
        ("x = residual_sublayer(x, self_attention",
         "x0 = x\n    x = residual_sublayer(x, self_attention"),
        ("cross_attn(y,", "cross_attn(self.norm2(x0) if self.norm_first else x0,"))),
    Pitfall("L2", "no residual around cross-attention", no_skip(DecoderLayer, "cross_attention")),
    Pitfall("L2", "no residual around self-attention", no_skip(DecoderLayer, "self_attention")),
    Pitfall("L2", "no residual around the feed-forward", no_skip(DecoderLayer, "feed_forward")),
    Pitfall("L1", "always pre-norm", _dec(names=PRE_ALWAYS)),
    Pitfall("L1", "always post-norm", _dec(names=POST_ALWAYS)),
    Pitfall("D4", "memory mask not passed", _dec((_CROSS, "cross_attn(y, memory, memory, None")),
            "pass memory_mask to the cross-attention: without it the target reads the source's "
            "padding."),
    Pitfall("L8", "masks swapped", _dec((_SELF, "self_attn(y, y, y, memory_mask"),
                                        (_CROSS, "cross_attn(y, memory, memory, tgt_mask"))),
    Pitfall("L5", "cross-attention first", _dec(
        (_N1, "cross_attention, self.norm1"), (_N2, "self_attention, self.norm2"))),
    Pitfall("L5", "feed-forward before cross-attention", _dec(
        (_N2, "feed_forward, self.norm2"), (_N3, "cross_attention, self.norm3"))),
    Pitfall("L6", "norm1 and norm2 swapped", _dec(
        (_N1, "self_attention, self.norm2"), (_N2, "cross_attention, self.norm1"))),
    Pitfall("L6", "norm2 and norm3 swapped", _dec(
        (_N2, "cross_attention, self.norm3"), (_N3, "feed_forward, self.norm2"))),
    Pitfall(None, "memory normalised", _dec(
        ("def cross_attention(y):",
         "m = self.norm2(memory) if self.norm_first else memory\n\n    def cross_attention(y):"),
        (_CROSS, "cross_attn(y, m, m, memory_mask")), "the memory enters the cross-attention as it "
            "is: the encoder already normalised it; norm2 acts on the decoder's x only."),
)


def _decoder_layer_cases(g):
    def case(label, d_model, heads, t, s, norm_first, batch=2, mask=True):
        args = (randn(g, batch, t, d_model), randn(g, batch, s, d_model),
                causal_mask(t)[None, None], padded(batch, s) if mask else None)
        return layer_case(label, DecoderLayer, args, d_model, heads, norm_first)

    return [case("post-norm, d_model=24, 4 heads, T=4, S=6, look-ahead and memory masks",
                 24, 4, 4, 6, False),
            case("pre-norm, d_model=24, 4 heads, T=4, S=6, look-ahead and memory masks",
                 24, 4, 4, 6, True),
            case("post-norm, T = S = 5, no memory mask, batch of 1", 16, 2, 5, 5, False, batch=1,
                 mask=False),
            case("pre-norm, d_model=8, 2 heads, T=3, S=5", 8, 2, 3, 5, True)]


_CAT = "torch.cat([bos, target[:, :-1]], dim=1)"
EXERCISES: dict[str, Exercise] = {
    "shift_right": exercise(
        shift_right, lambda g: [
            Case("B=2, T=5, bos_id=1", (torch.randint(3, 12, (2, 5), generator=g), 1)),
            Case("targets ending in EOS=2 and padding 0, bos_id=1",
                 (torch.tensor([[5, 6, 7, 2, 0, 0], [8, 9, 2, 0, 0, 0]]), 1)),
            Case("length 1, bos_id=2", (torch.tensor([[7], [4]]), 2)),
            Case("B=3, T=4, bos_id=3", (torch.randint(4, 20, (3, 4), generator=g), 3))],
        "output",
        ("T1", "no shift", (_CAT, "target.clone()"), None),
        (None, "shifted left", ("[bos, target[:, :-1]]", "[target[:, 1:], bos]"),
         "shift right, not left: BOS goes first, and position t holds target token t - 1."),
        (None, "first token dropped", ("target[:, :-1]", "target[:, 1:]"),
         "drop the last target token, not the first: the input is BOS, y_0, ..., y_(T-2)."),
        (None, "nothing dropped", ("target[:, :-1]", "target"),
         "keep the length T: after BOS, drop the last target token (target[:, :-1])."),
        (None, "torch.roll", (_CAT, "torch.roll(target, shifts=1, dims=1)"),
         "torch.roll wraps the last token around to position 0: put a column of bos_id there."),
        ("T11", "bos_id ignored", (":1], bos_id)", ":1], 1)"), None),
        ("T11", "BOS 0", (":1], bos_id)", ":1], 0)"), None),
        ("T12", "no BOS", ("[bos, target[:, :-1]]", "[target[:, :-1]]"), None),
        ("T13", "float ids", [("torch.full_like(target[:, :1], bos_id)",
                               "torch.ones(target.shape[0], 1) * bos_id")], None),
        ("T14", "BOS over the last token", (_CAT, "torch.cat([target[:, :-1], bos], dim=1)"), None),
    ),
    "cross_attention": Exercise(reference=cross_attention, make_cases=_cross_attention_cases,
                                outputs=("out", "weights"), sources=(cross_attention,),
                                pitfalls=CROSS_PITFALLS),
    "decoder_layer": Exercise(reference=DecoderLayer, make_cases=_decoder_layer_cases,
                              sources=(DecoderLayer.forward,), pitfalls=DECODER_PITFALLS),
}
