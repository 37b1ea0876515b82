"""Notebook 11's exercises: reading attention maps (``source_alignment``: I3, and
``attention_entropy``: I1, I2) and removing a head (``zero_head``: I4).
"""

import torch

from ..ablation import zero_head
from .engine import Case, Exercise, Pitfall

# ----------------------------------------------------------------------------------------------
# References and test cases
# ----------------------------------------------------------------------------------------------

def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy in bits of each query's attention, ``(..., Lq, Lk) -> (..., Lq)``, as notebook 11.

    0: the query looks at one key (a sharp head); ``log2(Lk)``: it spreads evenly. A weight of 0
    (a masked key) adds nothing, as 0 * log 0 is taken to be 0.
    """
    logs = weights.clamp_min(torch.finfo(weights.dtype).tiny).log2()  # finite even where w = 0
    return -(weights * logs).sum(dim=-1)  # sum over the keys


def _entropy_cases(gen: torch.Generator) -> list:
    def weights(*shape, blocked=0):
        scores = torch.randn(*shape, generator=gen) * 2
        if blocked:  # the last keys masked, as padding would be: exact zeros in the weights
            scores[..., -blocked:] = float("-inf")
        return scores.softmax(dim=-1)

    return [Case("one head, 4 queries x 6 keys", (weights(4, 6),)),
            Case("2 sentences x 4 heads, 5 queries x 7 keys", (weights(2, 4, 5, 7),)),
            Case("2 padded keys: weights exactly 0", (weights(3, 5, 6, blocked=2),)),
            Case("one-hot rows: entropy 0", (torch.eye(4),))]


def source_alignment(cross_weights: torch.Tensor) -> torch.Tensor:
    """For each target position, the source position it attends to most: ``(T, S) -> (T,)``."""
    return cross_weights.argmax(dim=-1)  # over the source positions (the keys)


def _alignment_cases(gen: torch.Generator) -> list:
    def weights(t, s):
        return (torch.randn(t, s, generator=gen) * 3).softmax(dim=-1)

    return [Case("5 target x 7 source words", (weights(5, 7),)),
            Case("7 target x 4 source words", (weights(7, 4),)),
            Case("4 x 4, a reordering", (torch.eye(4)[[0, 2, 1, 3]] * 0.7 + 0.075,))]


def _zero_head_cases(gen: torch.Generator) -> list:
    def merged(*shape):
        return torch.randn(*shape, generator=gen)

    return [Case("d_model=24, 4 heads (d_k=6), head 1", (merged(2, 5, 24), 1, 4)),
            Case("d_model=64, 4 heads (d_k=16), the last head", (merged(3, 7, 64), 3, 4)),
            Case("d_model=12, 3 heads (d_k=4), head 0", (merged(2, 6, 12), 0, 3)),
            Case("one sentence of one word, 8 heads of 2", (merged(1, 1, 16), 5, 8))]


def _zeroed(merged, columns):
    out = merged.clone()
    out[..., columns] = 0
    return out


EXERCISES: dict[str, Exercise] = {
    "attention_entropy": Exercise(
        reference=attention_entropy,
        make_cases=_entropy_cases,
        sources=(attention_entropy,),
        outputs=("entropy",),
        pitfalls=(
            Pitfall("I1", "log of exact zeros", lambda w: -(w * w.log2()).sum(dim=-1),
                    "0 * log(0) is NaN in floating point: a masked key (weight 0) must add 0. "
                    "Clamp the weights to a tiny positive number before the log (or use "
                    "torch.xlogy)."),
            Pitfall(None, "no minus sign", lambda w: (w * w.clamp_min(1e-38).log2()).sum(dim=-1),
                    "log p <= 0, so the entropy -sum p log p needs the minus sign to be >= 0."),
            Pitfall(None, "nats instead of bits",
                    lambda w: -(w * w.clamp_min(1e-38).log()).sum(dim=-1),
                    "notebook 11 measures entropy in bits (log2, as in section 6's table), so a "
                    "uniform head over Lk keys scores log2(Lk), not the natural log(Lk)."),
            Pitfall("I2", "summed over the queries",
                    lambda w: -(w * w.clamp_min(1e-38).log2()).sum(dim=-2),
                    "each query has its own distribution over the KEYS (the last axis): sum "
                    "there."),
            Pitfall(None, "log10", lambda w: -(w * w.clamp_min(1e-38).log10()).sum(dim=-1),
                    "entropy in bits uses log2: a uniform row over Lk keys scores log2(Lk)."),
            Pitfall(None, "the weight left out", lambda w: -w.log2().sum(dim=-1),
                    "each key's -log2(w) counts with its weight w: -sum w log2 w. Without the "
                    "factor w, a masked key (w = 0) gives an infinite entropy."),
            Pitfall(None, "a mean over the keys",
                    lambda w: -(w * w.clamp_min(1e-38).log2()).mean(dim=-1),
                    "entropy is a SUM over the keys, -sum w log2 w, not a mean: a mean divides "
                    "it by Lk."),
            Pitfall(None, "the key axis kept",
                    lambda w: -(w * w.clamp_min(1e-38).log2()).sum(dim=-1, keepdim=True),
                    "return one number per query, (..., Lq): sum over the keys without "
                    "keepdim=True."),
            Pitfall(None, "one number per map",
                    lambda w: -(w * w.clamp_min(1e-38).log2()).sum(dim=(-2, -1)),
                    "each query has its own entropy: sum over the keys only (dim=-1), "
                    "not over the whole map."),
        ),
    ),
    "source_alignment": Exercise(
        reference=source_alignment,
        make_cases=_alignment_cases,
        sources=(source_alignment,),
        outputs=("alignment",),
        pitfalls=(
            Pitfall("I3", "argmax over the targets", lambda w: w.argmax(dim=0),
                    "each row of a cross-attention map is one TARGET word's weights over the "
                    "source words: take the argmax along the last axis (dim=-1)."),
            Pitfall(None, "the weight instead of its position", lambda w: w.max(dim=-1).values,
                    "return WHERE the largest weight is (an index: argmax), not how large it is."),
            Pitfall(None, "argmin", lambda w: w.argmin(dim=-1),
                    "the aligned source word is the one with the LARGEST weight: argmax."),
            Pitfall(None, "argmax of the whole map", lambda w: w.argmax(),
                    "argmax without dim flattens the map and returns one number: give it "
                    "dim=-1, one answer per target word (row)."),
            Pitfall(None, "the source axis kept", lambda w: w.argmax(dim=-1, keepdim=True),
                    "return shape (T,): argmax(dim=-1) without keepdim=True."),
        ),
    ),
    "zero_head": Exercise(
        reference=zero_head,
        make_cases=_zero_head_cases,
        sources=(zero_head,),
        outputs=("merged",),
        pitfalls=(
            Pitfall("I4", "every num_heads-th feature",
                    lambda x, head, h: _zeroed(x, slice(head, None, h)),
                    "merge_heads (notebook 03) puts the heads side by side, not interleaved: "
                    "head i owns the d_k features i * d_k to (i + 1) * d_k - 1."),
            Pitfall(None, "a slice num_heads wide",
                    lambda x, head, h: _zeroed(x, slice(head * h, (head + 1) * h)),
                    "each head has d_k = d_model / num_heads features, not num_heads of them."),
            Pitfall(None, "the other heads zeroed",
                    lambda x, head, h: x - zero_head(x, head, h),
                    "ablation removes ONE head and keeps the others: set the chosen head's "
                    "features to 0, leave the rest as they are."),
            Pitfall(None, "one feature too many",
                    lambda x, head, h: _zeroed(x, slice(head * (x.shape[-1] // h),
                                                        (head + 1) * (x.shape[-1] // h) + 1)),
                    "Python slices leave out their end: head i owns features "
                    "i * d_k ... (i + 1) * d_k - 1, the slice [i * d_k:(i + 1) * d_k]."),
            Pitfall(None, "heads counted from 1",
                    lambda x, head, h: _zeroed(x, slice((head - 1) * (x.shape[-1] // h),
                                                        head * (x.shape[-1] // h))),
                    "heads are counted from 0: head 0 owns the first d_k features, "
                    "[0:d_k]; head i starts at i * d_k."),
            Pitfall(None, "d_k from the wrong axis",
                    lambda x, head, h: _zeroed(x, slice(head * (x.shape[1] // h),
                                                        (head + 1) * (x.shape[1] // h))),
                    "d_k = d_model / num_heads, with d_model the LAST axis, merged.shape[-1] "
                    "(axis 1 holds the L positions)."),
            Pitfall(None, "a position zeroed",
                    lambda x, head, h: _zeroed(x.transpose(1, 2), head).transpose(1, 2),
                    "the heads were merged into the LAST axis (the features); axis 1 holds the "
                    "positions of the sentence."),
        ),
    ),
}
