"""Small builders that the notebooks' case lists share: seeded tensors and masks, a module built
under a fixed seed, and LayerNorms made to differ. They import nothing a notebook teaches, so
every notebook's module may use them (pass the class to build: ``seeded(0, build_model, ...)``).
"""

import torch
from torch import nn

from .engine import Exercise, Pitfall, randn, slip

__all__ = ["randn", "random_mask", "causal", "slips", "seeded", "randomise_norms",
           "with_random_norms", "swaps", "exercise"]


def slips(target, rows, *always, names=None, method="forward") -> tuple:
    """One :class:`~.engine.Pitfall` per row ``(id, name, edits, hint)``: a :func:`~.engine.slip`
    of ``target`` with the row's ``edits`` (a list of ``(old, new)``), then the ``always`` edits;
    a ``hint`` of None takes the id's hint from pitfalls.HINTS."""
    return tuple(Pitfall(pid, name, slip(target, *edits, *always, names=names, method=method),
                         hint) for pid, name, edits, hint in rows)


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
    the global random state is left as it was. E.g. a tiny translator:
    ``seeded(0, build_model, TransformerConfig(16, 2, 1, 32, 0.0), 12, 12)``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        built = build(*args, **kwargs)
    return built.eval() if isinstance(built, nn.Module) else built


def randomise_norms(module: nn.Module) -> nn.Module:
    """Give every direct child LayerNorm (``norm1``, ``norm2``, ...) of ``module`` a gain near 1
    and a bias near 0 that differ per feature, from the global generator (which
    :class:`~.engine.ModuleCase` seeds), so that swapped or misplaced norms show."""
    with torch.no_grad():
        for name, child in module.named_children():
            if name.startswith("norm"):
                child.weight.copy_(1 + 0.3 * torch.randn_like(child.weight))
                child.bias.copy_(0.3 * torch.randn_like(child.bias))
    return module


def with_random_norms(cls: type) -> type:
    """A subclass of the layer ``cls`` built with :func:`randomise_norms`: give it to
    ``ModuleCase(weights_of=...)`` so that the learner's layer gets those weights."""

    def __init__(self, *args, **kwargs):
        cls.__init__(self, *args, **kwargs)
        randomise_norms(self)

    return type(f"RandomNorms{cls.__name__}", (cls,), {"__init__": __init__})


def swaps(target, old: str, rows, **kwargs) -> tuple:
    """:func:`slips` of ``target`` whose rows ``(id, name, new, hint)`` each put ``new`` in the
    place of the one expression ``old``."""
    return slips(target, [(pid, name, [(old, new)], hint) for pid, name, new, hint in rows],
                 **kwargs)


def padded(batch: int, length: int) -> torch.Tensor:
    """A ``(batch, 1, 1, length)`` padding mask, True = may attend, in which the last sentence
    ends two tokens early."""
    mask = torch.ones(batch, 1, 1, length, dtype=torch.bool)
    mask[-1, ..., -2:] = False
    return mask


def exercise(reference, make_cases, output, *rows) -> Exercise:
    """An exercise whose pitfalls are edits of ``reference``: ``(id, name, edits, hint[, shows])``
    rows (``edits``: one ``(old, new)`` pair, or a list of them; ``hint`` None: the id's own)."""
    return Exercise(reference=reference, make_cases=make_cases, sources=(reference,),
                    outputs=(output,), pitfalls=tuple(
                        Pitfall(pid, name, slip(reference, *([e] if isinstance(e, tuple) else e)),
                                hint, *shows) for pid, name, e, hint, *shows in rows))
