"""Notebook 07's exercises: the decoder's input (``shift_right``), ``cross_attention``,
and the learner's ``DecoderLayer.forward`` (``decoder_layer``), checked with the reference's
weights (M5, L4, L2, L1).
"""

import math

import torch

from ..attention import scaled_dot_product_attention
from ..layers import DecoderLayer
from ..masks import causal_mask
from .engine import Case, Exercise, ModuleCase, Pitfall, randn
from .nb01 import HINT_A3
from .nb05 import HINT_L1, HINT_L2, HINT_L6, randomise_norms, wrapped

# ----------------------------------------------------------------------------------------------
# References (shown by solution())
# ----------------------------------------------------------------------------------------------

def shift_right(target: torch.Tensor, bos_id: int) -> torch.Tensor:
    """Teacher forcing's decoder input: BOS, then the target without its last token.

    ``target (B, T)`` token ids -> ``(B, T)``: position t holds target token t - 1 (position 0
    holds ``bos_id``), so under the look-ahead mask position t sees only the tokens before the
    one it must predict. The labels stay ``target`` itself (section 3.1: "the output embeddings
    are offset by one position").
    """
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


# ----------------------------------------------------------------------------------------------
# Buggy variants, each with the learner's signature
# ----------------------------------------------------------------------------------------------

def _shift_none(target, bos_id):
    """T1: the target itself as the decoder input: position t sees the token it must predict."""
    return target.clone()


def _shift_left(target, bos_id):
    """Shifted left: the first token dropped and BOS put at the end."""
    return torch.cat([target[:, 1:], torch.full_like(target[:, :1], bos_id)], dim=1)


def _shift_drops_first(target, bos_id):
    """BOS in front, but the first target token dropped instead of the last (BOS overwrites y_0)."""
    return torch.cat([torch.full_like(target[:, :1], bos_id), target[:, 1:]], dim=1)


def _shift_keeps_all(target, bos_id):
    """BOS in front and nothing dropped: the input is one token longer than the labels."""
    return torch.cat([torch.full_like(target[:, :1], bos_id), target], dim=1)


def _shift_roll(target, bos_id):
    """``torch.roll``: shifted right, but the last token wraps around to position 0."""
    return torch.roll(target, shifts=1, dims=1)


def _shift_global_bos(target, bos_id):
    """bos_id ignored: the notebook's BOS = 1 written in its place."""
    return shift_right(target, 1)


def _shift_no_bos(target, bos_id):
    """The last token dropped but no BOS put in front: length T - 1."""
    return target[:, :-1].clone()


def _shift_float(target, bos_id):
    """The BOS column built as floats (torch.ones(B, 1) * bos_id): the ids become floats."""
    return torch.cat([torch.ones(target.shape[0], 1) * bos_id, target[:, :-1]], dim=1)


def _shift_bos_overwrites_last(target, bos_id):
    """Nothing shifted: BOS written over the last token."""
    out = target.clone()
    out[:, -1] = bos_id
    return out


def _cross_swapped(x, memory, w_q, w_k, w_v, memory_mask=None):
    """Queries from the memory, keys and values from the decoder: the arguments swapped."""
    return scaled_dot_product_attention(memory @ w_q, x @ w_k, x @ w_v, memory_mask)


def _cross_values_from_decoder(x, memory, w_q, w_k, w_v, memory_mask=None):
    """Keys from the memory but values from the decoder."""
    return scaled_dot_product_attention(x @ w_q, memory @ w_k, x @ w_v, memory_mask)


def _cross_is_self_attention(x, memory, w_q, w_k, w_v, memory_mask=None):
    """The memory never used: self-attention over the decoder's own positions."""
    return scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)


def _cross_mask_ignored(x, memory, w_q, w_k, w_v, memory_mask=None):
    """memory_mask never applied: every target position also reads the padded source tokens."""
    return scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ w_v)


def _cross_causal_memory(x, memory, w_q, w_k, w_v, memory_mask=None):
    """A look-ahead mask on the memory: target position t reads only source tokens 0..t."""
    T, S = x.shape[1], memory.shape[1]
    mask = torch.ones(1, T, S, dtype=torch.bool).tril()  # (1, T, S)
    if memory_mask is not None:
        mask = mask & memory_mask  # (1, T, S) & (B, 1, S) -> (B, T, S)
    return scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ w_v, mask)


def _cross_causal_memory_2d(x, memory, w_q, w_k, w_v, memory_mask=None):
    """A 2-D (T, S) look-ahead mask on the memory (refused: a mask has the scores' axes)."""
    mask = torch.ones(x.shape[1], memory.shape[1], dtype=torch.bool).tril()  # (T, S)
    if memory_mask is not None:
        mask = mask & memory_mask
    return scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ w_v, mask)


def _cross_inverted_by_hand(x, memory, w_q, w_k, w_v, memory_mask=None):
    """A3 written by hand: masked_fill(memory_mask, -inf), so a row with every key hidden is NaN."""
    q, k, v = x @ w_q, memory @ w_k, memory @ w_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if memory_mask is not None:
        scores = scores.masked_fill(memory_mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def _cross_inverted_mask(x, memory, w_q, w_k, w_v, memory_mask=None):
    """A3: the memory mask used with True = blocked."""
    mask = None if memory_mask is None else ~memory_mask
    return scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ w_v, mask)


def _cross_scaled_by_d_model(x, memory, w_q, w_k, w_v, memory_mask=None):
    """A1: scores divided by sqrt(d_model), the width of x, instead of sqrt(d_k)."""
    q, k, v = x @ w_q, memory @ w_k, memory @ w_v
    scale = math.sqrt(x.shape[-1] / q.shape[-1])  # sdpa divides by sqrt(d_k); make it sqrt(d_model)
    return scaled_dot_product_attention(q / scale, k, v, memory_mask)


def _cross_keys_from_decoder(x, memory, w_q, w_k, w_v, memory_mask=None):
    """Values from the memory but queries and keys from the decoder."""
    return scaled_dot_product_attention(x @ w_q, x @ w_k, memory @ w_v, memory_mask)


def _cross_weights_transposed(x, memory, w_q, w_k, w_v, memory_mask=None):
    """The weights used transposed, x @ w_q.T (fits only when d_k == d_model)."""
    return scaled_dot_product_attention(x @ w_q.T, memory @ w_k.T, memory @ w_v.T, memory_mask)


def _cross_unscaled(x, memory, w_q, w_k, w_v, memory_mask=None):
    """Scores q @ k^T never divided by sqrt(d_k)."""
    q = x @ w_q
    return scaled_dot_product_attention(q * math.sqrt(q.shape[-1]), memory @ w_k, memory @ w_v,
                                        memory_mask)


def _cross_mask_after_softmax(x, memory, w_q, w_k, w_v, memory_mask=None):
    """A2: the weights zeroed at padded keys after the softmax: rows no longer sum to 1."""
    q, k, v = x @ w_q, memory @ w_k, memory @ w_v
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if memory_mask is not None:
        weights = weights * memory_mask
    return weights @ v, weights


# ----------------------------------------------------------------------------------------------
# Test cases
# ----------------------------------------------------------------------------------------------

def _shift_right_cases(g):
    return [
        Case("B=2, T=5, bos_id=1", (torch.randint(3, 12, (2, 5), generator=g), 1)),
        Case("targets ending in EOS=2 and padding 0, bos_id=1",
             (torch.tensor([[5, 6, 7, 2, 0, 0], [8, 9, 2, 0, 0, 0]]), 1)),
        Case("length 1, bos_id=2", (torch.tensor([[7], [4]]), 2)),
        Case("B=3, T=4, bos_id=3", (torch.randint(4, 20, (3, 4), generator=g), 3)),
    ]


def _cross_attention_cases(g):
    def case(label, B, T, S, d_model, d_k, real=None):
        x, memory = randn(g, B, T, d_model), randn(g, B, S, d_model)
        weights = [randn(g, d_model, d_k) / math.sqrt(d_model) * 2 for _ in range(3)]
        mask = None
        if real is not None:  # real[b] source tokens in sentence b, then padding
            mask = (torch.arange(S)[None, :] < torch.tensor(real)[:, None])[:, None, :]  # (B, 1, S)
        return Case(label, (x, memory, *weights), {} if mask is None else {"memory_mask": mask})

    return [
        case("T = S = 4, no mask", 2, 4, 4, 8, 8),
        case("T=3, S=5, source padding (B, 1, S), d_k=4", 2, 3, 5, 8, 4, real=[5, 3]),
        case("T=5, S=2, no mask", 1, 5, 2, 6, 6),
        case("T = S = 4, source padding, d_k=4", 2, 4, 4, 8, 4, real=[4, 2]),
        case("one target position, S=6 with padding", 2, 1, 6, 8, 8, real=[6, 4]),
    ]


_HINT_CROSS_SOURCES = ("q = x @ w_q (queries from the decoder), k = memory @ w_k and "
                       "v = memory @ w_v (keys and values from the encoder's memory).")

# ----------------------------------------------------------------------------------------------
# decoder_layer: the reference's forward with one thing wrong
# ----------------------------------------------------------------------------------------------

def _decoder_variant(layout=None, causal=True, swap=False, residual=(True, True, True),
                     queries_from_input=False, memory_masked=True, masks_swapped=False,
                     order=(0, 1, 2), norms=(1, 2, 3), memory_normed=False):
    """A DecoderLayer whose forward has one bug: no look-ahead mask (M5), queries from the
    memory (L4), a missing residual (L2), a fixed layout (L1), the cross-attention's queries
    from the layer's input x instead of the first sub-layer's output (L7), no memory mask (D4),
    the two masks swapped, the sub-layers in another order (L5), LayerNorms swapped (L6), or the
    memory normalised by norm2 in pre-norm."""
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        pre = self.norm_first if layout is None else layout == "pre"
        self_mask, cross_mask = (memory_mask, tgt_mask) if masks_swapped else (tgt_mask,
                                                                                 memory_mask)
        first = x
        norm = [getattr(self, f"norm{i}") for i in norms]

        def attend(y):
            return self.dropout1(self.self_attn(y, y, y, self_mask if causal else None))

        def cross(y):
            if queries_from_input:
                y = norm[1](first) if pre else first
            mem = norm[1](memory) if memory_normed and pre else memory
            q, kv = (mem, y) if swap else (y, mem)
            return self.dropout2(self.cross_attn(q, kv, kv,
                                                 cross_mask if memory_masked else None))

        steps = [attend, cross, lambda y: self.dropout3(self.feed_forward(y))]
        for place, i in enumerate(order):  # the LayerNorms by place, not by sub-layer
            if queries_from_input and i == 1 and not pre:  # post-norm: norm2(h1 + attn(x, ..))
                x = norm[1](x + cross(x)) if residual[1] else norm[1](cross(x))
                continue
            x = wrapped(x, steps[i], norm[place], pre, residual[place])
        return x
    return type("BuggyDecoderLayer", (DecoderLayer,), {"forward": forward})


class RandomNormsDecoderLayer(DecoderLayer):
    """The reference with LayerNorms whose gain and bias differ per feature and per LayerNorm."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        randomise_norms(self)


def _decoder_layer_cases(g):
    def case(label, d_model, heads, t, s, norm_first, batch=2, padded=True):
        memory_mask = None
        if padded:  # the last source sentence ends two tokens early: (B, 1, 1, S)
            memory_mask = torch.ones(batch, 1, 1, s, dtype=torch.bool)
            memory_mask[-1, ..., -2:] = False
        args = (randn(g, batch, t, d_model), randn(g, batch, s, d_model),
                causal_mask(t)[None, None], memory_mask)
        return ModuleCase(label, args, weights_of=RandomNormsDecoderLayer,
                          init=dict(d_model=d_model, num_heads=heads, d_ff=2 * d_model,
                                    dropout=0.0, norm_first=norm_first))

    return [
        case("post-norm, d_model=24, 4 heads, T=4, S=6, look-ahead and memory masks",
             24, 4, 4, 6, False),
        case("pre-norm, d_model=24, 4 heads, T=4, S=6, look-ahead and memory masks",
             24, 4, 4, 6, True),
        case("post-norm, T = S = 5, no memory mask, batch of 1", 16, 2, 5, 5, False, batch=1,
             padded=False),
        case("pre-norm, d_model=8, 2 heads, T=3, S=5", 8, 2, 3, 5, True),
    ]


def _shift_bos_zero(target, bos_id):
    """bos_id ignored: 0 (often the padding id) written in its place."""
    return shift_right(target, 0)


EXERCISES: dict[str, Exercise] = {
    "shift_right": Exercise(
        reference=shift_right,
        make_cases=_shift_right_cases,
        sources=(shift_right,),
        pitfalls=(
            Pitfall("T1", "no shift", _shift_none,
                    "shift the target right behind BOS: torch.cat([bos, target[:, :-1]], dim=1). "
                    "Fed the target itself, position t sees the very token it must predict and the "
                    "model learns to copy it (a teacher-forcing leak)."),
            Pitfall(None, "shifted left", _shift_left,
                    "shift right, not left: BOS goes first and every target token moves one place "
                    "later (position t holds token t - 1)."),
            Pitfall(None, "first token dropped", _shift_drops_first,
                    "drop the last target token, not the first: the input is BOS, y_0, ..., "
                    "y_(T-2), so y_0 is still read and position t holds token t - 1."),
            Pitfall(None, "nothing dropped", _shift_keeps_all,
                    "keep the length T: after putting BOS in front, drop the last target token "
                    "(target[:, :-1]); the labels stay the whole target."),
            Pitfall(None, "torch.roll", _shift_roll,
                    "torch.roll wraps the last token around to position 0: put bos_id there "
                    "instead (torch.cat with a column of bos_id)."),
            Pitfall("T11", "bos_id ignored", _shift_global_bos,
                    "use the bos_id argument, not the notebook's BOS: the cases use other ids."),
            Pitfall("T11", "BOS 0", _shift_bos_zero,
                    "use the bos_id argument, not a fixed 0 (0 is often the padding id): "
                    "torch.full_like(target[:, :1], bos_id)."),
            Pitfall("T12", "no BOS", _shift_no_bos,
                    "put bos_id in front: without it the input has T - 1 tokens and position 0 "
                    "has nothing to start from."),
            Pitfall("T13", "float ids", _shift_float,
                    "token ids stay integers: build the BOS column with target's dtype, "
                    "torch.full_like(target[:, :1], bos_id)."),
            Pitfall("T14", "BOS over the last token", _shift_bos_overwrites_last,
                    "shift every token one place right; writing bos_id over one token leaves the "
                    "others where they were, so position t still reads its own label."),
        ),
    ),
    "cross_attention": Exercise(
        reference=cross_attention,
        make_cases=_cross_attention_cases,
        outputs=("out", "weights"),
        sources=(cross_attention,),
        pitfalls=(
            Pitfall(None, "queries from the memory", _cross_swapped,
                    "the arguments are swapped: " + _HINT_CROSS_SOURCES + " When S == T the swap "
                    "raises no error: it is silently wrong."),
            Pitfall(None, "values from the decoder", _cross_values_from_decoder,
                    "the values come from the memory too, like the keys: " + _HINT_CROSS_SOURCES),
            Pitfall(None, "memory unused", _cross_is_self_attention,
                    "that is self-attention; cross-attention reads the encoder's memory: "
                    + _HINT_CROSS_SOURCES),
            Pitfall(None, "memory mask ignored", _cross_mask_ignored,
                    "pass memory_mask to the attention, so that no target position reads a padded "
                    "source token."),
            Pitfall(None, "look-ahead mask on the memory", _cross_causal_memory,
                    "the look-ahead mask belongs to the decoder's self-attention only: the whole "
                    "source is known, so every target position may read every real source token "
                    "(use memory_mask alone)."),
            Pitfall(None, "2-D look-ahead mask on the memory", _cross_causal_memory_2d,
                    "the look-ahead mask belongs to the decoder's self-attention only: the whole "
                    "source is known, so every target position may read every real source token "
                    "(use memory_mask alone)."),
            Pitfall("A3", "inverted memory mask", _cross_inverted_mask, HINT_A3),
            Pitfall("A3", "inverted memory mask, by hand", _cross_inverted_by_hand, HINT_A3),
            Pitfall("A1", "scaled by sqrt(d_model)", _cross_scaled_by_d_model,
                    "divide by the square root of the key dimension of one head: d_k = "
                    "w_k.shape[1], not d_model = x.shape[-1]."),
            Pitfall(None, "keys from the decoder", _cross_keys_from_decoder,
                    "the keys come from the memory, like the values: " + _HINT_CROSS_SOURCES),
            Pitfall(None, "weights transposed", _cross_weights_transposed,
                    "the weights are (d_model, d_k): use x @ w_q, with no .T."),
            Pitfall(None, "no scaling", _cross_unscaled,
                    "divide the scores by sqrt(d_k) before the softmax (or call "
                    "scaled_dot_product_attention, which does)."),
            Pitfall("A2", "mask after the softmax", _cross_mask_after_softmax,
                    "mask the scores before softmax, so that each row's weights still sum to 1 "
                    "(scaled_dot_product_attention(q, k, v, memory_mask) does it)."),
        ),
    ),
    "decoder_layer": Exercise(
        reference=DecoderLayer,
        make_cases=_decoder_layer_cases,
        sources=(DecoderLayer.forward,),
        pitfalls=(
            Pitfall("M5", "no look-ahead mask", _decoder_variant(causal=False),
                    "the decoder's self-attention needs the look-ahead mask: pass tgt_mask to "
                    "self.self_attn, or position t reads the tokens after it."),
            Pitfall("L4", "query and memory swapped", _decoder_variant(swap=True),
                    "in cross-attention the queries come from the decoder, keys and values from "
                    "the memory: self.cross_attn(x, memory, memory, memory_mask)."),
            Pitfall("L7", "cross-attention queries from x",
                    _decoder_variant(queries_from_input=True),
                    "the cross-attention's queries are the first sub-layer's output (h1 in the "
                    "equations), not the layer's input x: update x after each sub-layer and "
                    "pass the updated x (normalised by norm2 in pre-norm) as the query."),
            Pitfall("L2", "no residual around cross-attention",
                    _decoder_variant(residual=(True, False, True)), HINT_L2),
            Pitfall("L2", "no residual around self-attention",
                    _decoder_variant(residual=(False, True, True)), HINT_L2),
            Pitfall("L2", "no residual around the feed-forward",
                    _decoder_variant(residual=(True, True, False)), HINT_L2),
            Pitfall("L1", "always pre-norm", _decoder_variant(layout="pre"), HINT_L1),
            Pitfall("L1", "always post-norm", _decoder_variant(layout="post"), HINT_L1),
            Pitfall("D4", "memory mask not passed", _decoder_variant(memory_masked=False),
                    "pass memory_mask to the cross-attention: self.cross_attn(q, memory, memory, "
                    "memory_mask); without it the target reads the source's padding."),
            Pitfall("L8", "masks swapped", _decoder_variant(masks_swapped=True),
                    "tgt_mask (look-ahead) goes to the self-attention, memory_mask (source "
                    "padding) to the cross-attention."),
            Pitfall("L5", "cross-attention first", _decoder_variant(order=(1, 0, 2)),
                    "the order is masked self-attention, cross-attention, feed-forward."),
            Pitfall("L5", "feed-forward before cross-attention", _decoder_variant(order=(0, 2, 1)),
                    "the order is masked self-attention, cross-attention, feed-forward."),
            Pitfall("L6", "norm1 and norm2 swapped", _decoder_variant(norms=(2, 1, 3)), HINT_L6),
            Pitfall("L6", "norm2 and norm3 swapped", _decoder_variant(norms=(1, 3, 2)), HINT_L6),
            Pitfall(None, "memory normalised", _decoder_variant(memory_normed=True),
                    "the memory enters the cross-attention as it is: the encoder already "
                    "normalised it; norm2 acts on the decoder's x only."),
        ),
    ),
}
