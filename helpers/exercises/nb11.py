"""Notebook 11's exercises: ``attention_entropy``, ``source_alignment`` and ``zero_head``."""

import torch

from ..ablation import zero_head
from .cases import exercise, randn
from .engine import Case, Exercise


def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy in bits of each query's attention, (..., Lq, Lk) -> (..., Lq); a 0 weight adds 0."""
    logs = weights.clamp_min(torch.finfo(weights.dtype).tiny).log2()  # finite even where w = 0
    return -(weights * logs).sum(dim=-1)  # sum over the keys


def source_alignment(cross_weights: torch.Tensor) -> torch.Tensor:
    """For each target position, the source position it attends to most: ``(T, S) -> (T,)``."""
    return cross_weights.argmax(dim=-1)  # over the source positions (the keys)


def _entropy_cases(gen: torch.Generator) -> list:
    def weights(*shape, blocked=0):
        scores = randn(gen, *shape) * 2
        if blocked:  # the last keys masked, as padding would be: exact zeros in the weights
            scores[..., -blocked:] = float("-inf")
        return scores.softmax(dim=-1)

    return [Case("one head, 4 queries x 6 keys", (weights(4, 6),)),
            Case("2 sentences x 4 heads, 5 queries x 7 keys", (weights(2, 4, 5, 7),)),
            Case("2 padded keys: weights exactly 0", (weights(3, 5, 6, blocked=2),)),
            Case("one-hot rows: entropy 0", (torch.eye(4),))]


SUM, CLAMP = "sum(dim=-1)", ".clamp_min(torch.finfo(weights.dtype).tiny)"
BASE = ("entropy in bits uses log2 (a uniform row over Lk keys scores log2(Lk)), not the natural "
        "log nor log10.")
SHAPE = ("return one number per query, (..., Lq): sum over the keys only (dim=-1), without "
         "keepdim=True, and not over the whole map.")
SLICE = "out[..., head * d_k:(head + 1) * d_k] = 0"
AXIS = ("head i owns features i * d_k ... (i + 1) * d_k - 1 of the LAST axis, with d_k = "
        "merged.shape[-1] // num_heads: axis 1 holds the positions of the sentence.")
EXERCISES: dict[str, Exercise] = {
    "attention_entropy": exercise(
        attention_entropy, _entropy_cases, "entropy",
        ("I1", "log of exact zeros", (CLAMP, ""), None),
        (None, "no minus sign", ("return -(", "return ("),
         "log p <= 0, so the entropy -sum p log p needs the minus sign to be >= 0."),
        (None, "nats instead of bits", (".log2()", ".log()"), BASE),
        ("I2", "summed over the queries", (SUM, "sum(dim=-2)"), None),
        (None, "log10", (".log2()", ".log10()"), BASE),
        (None, "the weight left out", [(CLAMP, ""), ("(weights * logs)", "logs")],
         "each key's -log2(w) counts with its weight w: -sum w log2 w. Without the factor w, "
         "a masked key (w = 0) gives an infinite entropy."),
        (None, "a mean over the keys", (SUM, "mean(dim=-1)"),
         "entropy is a SUM over the keys, -sum w log2 w, not a mean: a mean divides it by Lk."),
        (None, "the key axis kept", (SUM, "sum(dim=-1, keepdim=True)"), SHAPE),
        (None, "one number per map", (SUM, "sum(dim=(-2, -1))"), SHAPE),
    ),
    "source_alignment": exercise(
        source_alignment, lambda g: [
            Case("5 target x 7 source words", ((randn(g, 5, 7) * 3).softmax(dim=-1),)),
            Case("7 target x 4 source words", ((randn(g, 7, 4) * 3).softmax(dim=-1),)),
            Case("4 x 4, a reordering", (torch.eye(4)[[0, 2, 1, 3]] * 0.7 + 0.075,))],
        "alignment",
        ("I3", "argmax over the targets", ("argmax(dim=-1)", "argmax(dim=0)"), None),
        (None, "the weight instead of its position", ("argmax(dim=-1)", "max(dim=-1).values"),
         "return WHERE the largest weight is (an index: argmax), not how large it is."),
        (None, "argmin", ("argmax", "argmin"),
         "the aligned source word is the one with the LARGEST weight: argmax."),
        (None, "argmax of the whole map", ("argmax(dim=-1)", "argmax()"),
         "argmax without dim flattens the map and returns one number: give it dim=-1, one "
         "answer per target word (row)."),
        (None, "the source axis kept", ("dim=-1", "dim=-1, keepdim=True"),
         "return shape (T,): argmax(dim=-1) without keepdim=True."),
    ),
    "zero_head": exercise(
        zero_head, lambda g: [
            Case("d_model=24, 4 heads (d_k=6), head 1", (randn(g, 2, 5, 24), 1, 4)),
            Case("d_model=64, 4 heads (d_k=16), the last head", (randn(g, 3, 7, 64), 3, 4)),
            Case("d_model=12, 3 heads (d_k=4), head 0", (randn(g, 2, 6, 12), 0, 3)),
            Case("one sentence of one word, 8 heads of 2", (randn(g, 1, 1, 16), 5, 8))],
        "merged",
        ("I4", "every num_heads-th feature", (SLICE, "out[..., head::num_heads] = 0"), None),
        (None, "a slice num_heads wide",
         ("head * d_k:(head + 1) * d_k", "head * num_heads:(head + 1) * num_heads"),
         "each head has d_k = d_model / num_heads features, not num_heads of them."),
        (None, "the other heads zeroed", ("return out", "return merged - out"),
         "ablation removes ONE head and keeps the others: set the chosen head's features to 0, "
         "leave the rest as they are."),
        (None, "one feature too many", ("(head + 1) * d_k]", "(head + 1) * d_k + 1]"),
         "Python slices leave out their end: head i owns features i * d_k ... (i + 1) * d_k - 1, "
         "the slice [i * d_k:(i + 1) * d_k]."),
        (None, "heads counted from 1",
         ("head * d_k:(head + 1) * d_k", "(head - 1) * d_k:head * d_k"), "heads are counted from "
         "0: head 0 owns the first d_k features, [0:d_k]; head i starts at i * d_k."),
        (None, "d_k from the wrong axis", ("merged.shape[-1] //", "merged.shape[1] //"), AXIS),
        (None, "a position zeroed", (SLICE, "out[:, head] = 0"), AXIS),
    ),
}
