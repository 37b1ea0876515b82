"""Builders the notebooks' case lists share (seeded tensors and masks, slips, seeded modules);
they import nothing a notebook teaches, so every notebook's module may use them."""

import torch
from torch import nn

from .engine import Exercise, Pitfall, randn, slip

__all__ = ["randn", "random_mask", "causal", "slips", "seeded", "with_random_norms", "swaps",
           "exercise"]


def slips(target, rows, *always, names=None, method="forward") -> tuple:
    """One :class:`~.engine.Pitfall` per row ``(id, name, edits, hint[, shows])``: a
    :func:`~.engine.slip` of ``target`` with the row's ``edits`` (one ``(old, new)`` pair or a
    list of them), then the ``always`` edits; a ``hint`` of None: the id's own in HINTS."""
    pitfalls = []
    for pid, name, edits, hint, *shows in rows:
        edits = [edits] if edits and isinstance(edits[0], str) else edits
        variant = slip(target, *edits, *always, names=names, method=method)
        pitfalls.append(Pitfall(pid, name, variant, hint, *shows))
    return tuple(pitfalls)


def random_mask(g: torch.Generator, *shape: int) -> torch.Tensor:
    """A random bool mask, True = may attend, that blocks the last key of every row and leaves
    at least one key open in each (so masking bugs show, and no row is empty by chance)."""
    mask = torch.rand(*shape, generator=g) < 0.6
    mask[..., -1] = False
    mask[..., 0] |= ~mask.any(dim=-1)
    return mask


def causal(size: int) -> torch.Tensor:
    """The ``(size, size)`` look-ahead mask, True on and below the diagonal (notebook 06's)."""
    return torch.ones(size, size, dtype=torch.bool).tril()


def seeded(seed: int, build, *args, **kwargs):
    """``build(*args, **kwargs)`` under ``torch.manual_seed(seed)``, in eval mode if a module;
    the global random state is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        built = build(*args, **kwargs)
    return built.eval() if isinstance(built, nn.Module) else built


def with_random_norms(cls: type) -> type:
    """A subclass of the layer ``cls`` for ``ModuleCase(weights_of=...)`` whose LayerNorms
    (``norm1``, ...) get a gain near 1 and a bias near 0 that differ per feature, from the global
    generator (which ModuleCase seeds), so that swapped or misplaced norms show."""

    def __init__(self, *args, **kwargs):
        cls.__init__(self, *args, **kwargs)
        with torch.no_grad():
            for name, child in self.named_children():
                if name.startswith("norm"):
                    child.weight.copy_(1 + 0.3 * torch.randn_like(child.weight))
                    child.bias.copy_(0.3 * torch.randn_like(child.bias))

    return type(f"RandomNorms{cls.__name__}", (cls,), {"__init__": __init__})


def swaps(target, old: str, rows, **kwargs) -> tuple:
    """:func:`slips` of ``target`` whose rows ``(id, name, new, hint)`` each put ``new`` in the
    place of the one expression ``old``."""
    return slips(target, [(pid, name, (old, new), hint) for pid, name, new, hint in rows],
                 **kwargs)


def padded(batch: int, length: int) -> torch.Tensor:
    """A ``(batch, 1, 1, length)`` padding mask, True = may attend, in which the last sentence
    ends two tokens early."""
    mask = torch.ones(batch, 1, 1, length, dtype=torch.bool)
    mask[-1, ..., -2:] = False
    return mask


def exercise(reference, make_cases, output, *rows) -> Exercise:
    """An exercise whose pitfalls are :func:`slips` of ``reference`` (rows as there)."""
    return Exercise(reference=reference, make_cases=make_cases, sources=(reference,),
                    outputs=(output,), pitfalls=slips(reference, rows))
