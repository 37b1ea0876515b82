"""Notebook 13's exercises: what data parallelism asks of the learner, the loss of one rank
(``rank_loss``: S1, S2), DDP's gradient all-reduce written by hand (``average_gradients``: S5),
checked in two gloo processes against DDP itself, and a rank's share of a step's batch
(``rank_batch``: S3, S4).
"""

import builtins
import copy
import inspect
import sys
import tempfile
import textwrap
import traceback
from argparse import Namespace
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed import distributed_c10d
from torch.nn.parallel import DistributedDataParallel as DDP

from ..data import PAD_ID, make_batch
from ..distributed import average_gradients, rank_loss, spawn
from ..model import TransformerConfig, build_model
from .compare import _raised_by_course
from .engine import Case, Exercise, Pitfall
from .stubs import is_stub

# ----------------------------------------------------------------------------------------------
# rank_loss: what one of W processes must backpropagate
# ----------------------------------------------------------------------------------------------

def _rank_loss_cases(gen: torch.Generator) -> list:
    def rank(b, T, real, N, W):
        mask = torch.arange(T)[None, :] < torch.tensor(real)[:, None]  # (b, T) padding at the end
        losses = torch.rand(b, T, generator=gen) * 5
        losses[~mask] = torch.rand(int((~mask).sum()), generator=gen) * 5  # padding: not 0
        return (losses, mask, N, W)

    return [Case("rank 0 of 2: 3 pairs, 12 of all 30 tokens", rank(3, 6, [6, 4, 2], 30, 2)),
            Case("rank 1 of 2: 2 pairs, 18 of all 30 tokens", rank(2, 9, [9, 9], 30, 2)),
            Case("rank 3 of 4: 4 pairs, 11 of all 40 tokens", rank(4, 5, [5, 3, 2, 1], 40, 4)),
            Case("one process (W = 1): its own 14 tokens", rank(2, 7, [7, 7], 14, 1))]


# ----------------------------------------------------------------------------------------------
# average_gradients: DDP's all-reduce by hand, run in two gloo processes
# ----------------------------------------------------------------------------------------------

# The models of the check: (case label, model kind), each trained one step in both processes.
KINDS = {"transformer": "a small Transformer, 4 sentence pairs of its own on each rank",
         "frozen": "the same with its source embedding frozen (its .grad stays None)",
         "mlp": "a 2-layer MLP, 3 examples on rank 0 and 5 on rank 1"}
# Time limits of the check, in seconds (the exercise's time_limit, 120 s, is longer: these end
# first, with a clearer message, and stop the processes). A correct answer takes 1-5 s.
COLLECTIVE_TIMEOUT = 30  # a rank waits this long in a collective that the other never joins
CHECK_TIMEOUT = 90  # the check waits this long for its two processes, then stops them


def ddp_all_reduce(model) -> None:
    """What an answer must match: DistributedDataParallel itself. For this one the check wraps
    a copy of the model in DDP, which all-reduces during ``backward``: nothing is left to do."""


def _step(kind: str, rank: int, world_size: int):
    """The model of ``kind`` (the same weights on every rank) and a function that computes this
    rank's loss, weighted as DDP needs it (:func:`helpers.distributed.rank_loss`)."""
    gen = torch.Generator().manual_seed(7)
    if kind == "mlp":
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        x, y = torch.randn(8, 3, generator=gen), torch.randn(8, 2, generator=gen)
        mine = slice(0, 3) if rank == 0 else slice(3, 8)  # unequal shares: 3 and 5 examples

        def loss(m):
            errors = (m(x[mine]) - y[mine]).pow(2).sum(dim=1)  # (b,)
            return rank_loss(errors, torch.ones_like(errors, dtype=torch.bool), len(x),
                             world_size)
        return model, loss
    torch.manual_seed(0)
    model = build_model(TransformerConfig(16, 2, 1, 32, 0.0), 11, 13)
    if kind == "frozen":
        model.src_embed.weight.requires_grad_(False)
    lengths = torch.randint(1, 7, (16,), generator=gen).tolist()
    pairs = [(torch.randint(4, 11, (n,), generator=gen).tolist(),
              torch.randint(4, 13, (8 - n,), generator=gen).tolist()) for n in lengths[:8]]
    whole = make_batch([s for s, _ in pairs], [t for _, t in pairs])
    batch = make_batch([s for s, _ in pairs[rank::world_size]],
                       [t for _, t in pairs[rank::world_size]])  # as DistributedSampler deals
    real = batch.tgt_out != PAD_ID

    def loss(m):
        logits = m(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)  # (b, T, V)
        losses = F.cross_entropy(logits.transpose(1, 2), batch.tgt_out, reduction="none")
        return rank_loss(losses, real, int((whole.tgt_out != PAD_ID).sum()), world_size)
    return model, loss


def _gradients(model) -> torch.Tensor:
    """Every trainable parameter's gradient, flat (a missing one as zeros)."""
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten()
                      for p in model.parameters() if p.requires_grad])


@dataclass(frozen=True)
class Failure:
    """What an answer raised in a process, sent back to be raised again in the notebook's;
    ``collective``: the ``torch.distributed`` call it came out of (``"all_reduce"``, ...), if
    any: there a rank raises when the other never joins it (:func:`_error`)."""

    kind: str
    message: str
    collective: str | None = None
    course: bool = False  # raised by the course's own code (helpers/): given whole

    def error(self) -> BaseException:
        kind = getattr(builtins, self.kind, None)  # ValueError, NameError, ...: the same again
        if isinstance(kind, type) and issubclass(kind, (Exception, SystemExit)):
            error = kind(self.message)
        else:
            error = RuntimeError(f"{self.kind}: {self.message}")
        error.whole = self.course
        return error


def _portable(fn):
    """``fn`` as a new process can receive it: itself, when it is a module-level function of
    ``helpers`` (pickle sends its name); else its source, defined again there (a function of
    a notebook cell cannot be pickled by name, since the new process has no such cell)."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    if module and module.__name__.startswith("helpers.") and getattr(
            module, fn.__qualname__, None) is fn:
        return fn
    if getattr(fn, "__name__", "<lambda>") == "<lambda>":
        raise TypeError("check runs your function in two new processes from its source: "
                        "write it with def, in a cell of its own")
    try:
        return fn.__name__, textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as error:
        raise TypeError(f"check runs your function in two new processes and needs its "
                        f"source, which Python cannot find ({error})") from None


def _restore(portable):
    """The function :func:`_portable` sent: defined again from its source with ``torch`` and
    ``dist`` (``torch.distributed``) as its only names, or itself."""
    if callable(portable):
        return portable
    name, source = portable
    namespace = {"torch": torch, "dist": dist, "nn": torch.nn}
    exec(compile(source, f"<your {name}>", "exec"), namespace)  # noqa: S102 (the learner's)
    return namespace[name]


def _collective(error: BaseException) -> str | None:
    """The ``torch.distributed`` function that ``error`` was raised in, if any."""
    names = [frame.f_code.co_name for frame, _ in traceback.walk_tb(error.__traceback__)
             if frame.f_code.co_filename == distributed_c10d.__file__]
    public = [name for name in names if not name.startswith("_") and name != "wrapper"]
    return public[0] if public else None


def _watched(fn, model) -> dict:
    """Call ``fn(model)`` and say what it did, for the hints that outputs cannot give (several
    slips leave every gradient as it was): what it all-reduced (a ``p.grad``, a weight, or
    another tensor such as a copy), whether it returned something, whether any gradient
    changed."""
    before = _gradients(model).clone()
    grads = {p.grad.data_ptr() for p in model.parameters() if p.grad is not None}
    weights = {p.data_ptr() for p in model.parameters()}
    reduced, real = set(), dist.all_reduce

    def recording(tensor, *args, **kwargs):
        ptr = tensor.data_ptr() if torch.is_tensor(tensor) else None
        reduced.add("grad" if ptr in grads else "weight" if ptr in weights else "other")
        return real(tensor, *args, **kwargs)

    dist.all_reduce = recording  # the learner's dist.all_reduce, however it was imported
    try:
        returned = fn(model)
    finally:
        dist.all_reduce = real
    return {"reduced": reduced, "returned": returned is not None,
            "unchanged": torch.equal(before, _gradients(model))}


def _gradients_job(rank: int, world_size: int, args) -> None:
    """In each process (in the process group that :func:`helpers.distributed.spawn` joined):
    with ``args.ddp``, every model of ``args.kinds`` takes one step under DDP; then once per
    function of ``args.functions`` without DDP (the function called after ``backward``); the
    gradients, or what a function raised, go to ``args.folder/rank<r>.pt`` (a file each, so
    that an answer that leaves the other rank waiting cannot hide the results). A learner's
    answer alone runs without DDP: the reference's gradients are kept from the first check."""
    results = {}
    try:
        for kind in args.kinds if args.ddp else ():
            model, loss = _step(kind, rank, world_size)
            wrapped = DDP(copy.deepcopy(model))
            loss(wrapped).backward()
            results[kind, "ddp"] = (_gradients(wrapped.module), None)
        for key, portable in args.functions.items():  # the learner's last
            for kind in args.kinds:
                model, loss = _step(kind, rank, world_size)
                loss(model).backward()
                try:
                    how = _watched(_restore(portable), model)
                    results[kind, key] = (_gradients(model), how)
                except (Exception, SystemExit) as error:  # noqa: BLE001 (sent back as it is)
                    failure = Failure(type(error).__name__, str(error), _collective(error),
                                      _raised_by_course(error))
                    results.update({(k, key): failure for k in args.kinds})
                    break  # the other rank may be waiting in a collective: not another one
    finally:
        torch.save(results, Path(args.folder) / f"rank{rank}.pt")


_KNOWN = {}  # function -> its results in both processes: the reference's and the variants'


def _key(fn) -> str:
    return "ddp" if fn is ddp_all_reduce else f"{fn.__module__}.{fn.__qualname__}"


def _run(functions: dict) -> list:
    """``{key: function}`` -> ``[rank 0's results, rank 1's]`` from :func:`_gradients_job`,
    within ``CHECK_TIMEOUT`` seconds (a rank still running then is a TimeoutError)."""
    with tempfile.TemporaryDirectory() as folder:
        files = [Path(folder) / f"rank{r}.pt" for r in (0, 1)]
        try:
            spawn(2, Namespace(threads=1, kinds=list(KINDS), folder=folder,
                               ddp="ddp" in functions,
                               functions={key: _portable(fn) for key, fn in functions.items()
                                          if key != "ddp"}),
                  _gradients_job, timeout=CHECK_TIMEOUT, group_timeout=COLLECTIVE_TIMEOUT)
        except TimeoutError:
            if "yours" not in functions:
                raise
            late = " and ".join(str(r) for r, file in enumerate(files) if not file.exists())
            error = TimeoutError(f"it had not returned on rank {late or '0 and 1'} after "
                                 f"{CHECK_TIMEOUT} s, so both processes were stopped: does it "
                                 "wait there for something that the other rank never does?")
            error.whole = True  # the check's own words: never cut
            raise error from None
        return [torch.load(file, weights_only=False) for file in files]


_PENDING = {}  # the learner's last function -> the outcomes of its cases not yet asked for


def _results(fn, kind: str) -> list:
    """Both ranks' results for ``fn`` on the model ``kind``: the reference and the variants are
    run together, once; a learner's function once per check (its first case runs them all),
    and what stopped its processes (a TimeoutError, ...) is the outcome of each case."""
    known = [ddp_all_reduce, average_gradients,
             *(p.variant for p in EXERCISES["average_gradients"].pitfalls)]
    if fn in known:
        if fn not in _KNOWN:
            ranks = _run({_key(f): f for f in known})
            for f in known:
                _KNOWN[f] = [{k: r[k, _key(f)] for k in KINDS} for r in ranks]
        return [by_kind[kind] for by_kind in _KNOWN[fn]]
    if kind not in _PENDING.get(fn, {}):
        _PENDING.clear()
        try:
            ranks = _run({"yours": fn})
            _PENDING[fn] = {k: [r[k, "yours"] for r in ranks] for k in KINDS}
        except Exception as error:  # noqa: BLE001 (a TimeoutError, or a rank that crashed)
            _PENDING[fn] = dict.fromkeys(KINDS, error)
    outcome = _PENDING[fn].pop(kind)
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def _error(outcomes: list) -> BaseException | None:
    """What to report when a rank's function raised: the learner's own error as it was raised
    (a NameError, ...), before the error of a rank left waiting in a collective (which only
    follows from it); and when a rank waited in a collective that the other rank returned
    without joining, that, in words."""
    failures = {r: o for r, o in enumerate(outcomes) if isinstance(o, Failure)}
    own = [f for f in failures.values() if f.collective is None]
    if own or not failures:
        return own[0].error() if own else None
    rank, failure = next(iter(failures.items()))
    returned = [r for r in range(len(outcomes)) if r not in failures]
    if not returned:
        return failure.error()
    error = RuntimeError(f"rank {rank} waited in dist.{failure.collective} for rank "
                         f"{returned[0]}, which returned without joining it: every rank must "
                         "call the same collectives, in the same order")
    error.whole = True  # the check's own words: never cut
    return error


@dataclass(frozen=True)
class AllReduceCase(Case):
    """Both ranks' gradients ``(2, n)`` after one step of the model ``kind`` and the learner's
    function (one pair of processes runs every case of a function at once)."""

    kind: str = "transformer"

    def run(self, fn):
        if fn is not ddp_all_reduce and is_stub(fn):  # untouched: no processes to start
            return fn(torch.nn.Linear(1, 1))
        outcomes = _results(fn, self.kind)
        error = _error(outcomes)
        if error is not None:
            raise error
        gradients = torch.stack([grads for grads, _ in outcomes])
        hows = [how for _, how in outcomes if how is not None]
        if hows:  # what both ranks' functions did, for the pitfalls' ``shows``
            gradients.how = {"reduced": set().union(*(h["reduced"] for h in hows)),
                             "returned": any(h["returned"] for h in hows),
                             "unchanged": all(h["unchanged"] for h in hows)}
        return gradients


def _did(test):
    """A pitfall's ``shows``: ``test`` holds for what the learner's function did in every case
    (recorded by :func:`_watched`)."""
    def shows(outcomes):
        return all(hasattr(o, "how") and test(o.how) for o in outcomes)
    return shows


def _left(test):  # every p.grad left as it was, and test
    return _did(lambda how: how["unchanged"] and "grad" not in how["reduced"] and test(how))


def _summed(model):  # S5: all_reduce adds, and nothing divides
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)


def _divided_only(model):  # no all-reduce: this rank's gradient, halved
    for p in model.parameters():
        if p.grad is not None:
            p.grad /= dist.get_world_size()


def _weights_reduced(model):  # the weights averaged, not the gradients
    for p in model.parameters():
        dist.all_reduce(p.data)
        p.data /= dist.get_world_size()


def _averages_returned(model):  # the average computed in new tensors and returned
    averages = []
    for p in model.parameters():
        if p.grad is not None:
            total = p.grad.clone()
            dist.all_reduce(total)
            averages.append(total / dist.get_world_size())
    return averages


def _copy_reduced(model):  # a copy all-reduced, p.grad left as it was
    for p in model.parameters():
        if p.grad is not None:
            grad = p.grad.clone()
            dist.all_reduce(grad)
            grad /= dist.get_world_size()


def _nothing_stored(model):  # the result of each division dropped
    for p in model.parameters():
        if p.grad is not None:
            p.grad / dist.get_world_size()


# ----------------------------------------------------------------------------------------------
# rank_batch: which items of the shared order rank r trains on at a step
# ----------------------------------------------------------------------------------------------

def rank_batch(order: torch.Tensor, step: int, rank: int, world_size: int,
               batch_size: int) -> torch.Tensor:
    """Rank ``rank``'s items at step ``step`` (from 0), dealt as ``DistributedSampler`` deals.

    ``order``: the epoch's permutation of the dataset's indices, the same on every rank (same
    seed). Step s uses the block ``order[s*B : (s+1)*B]`` of the global batch B, dealt out in
    turn: rank r gets the block's items r, r + W, r + 2W, ... (B / W of them).
    """
    start = step * batch_size  # the global batch advances by B every step
    return order[start + rank:start + batch_size:world_size]


def _rank_batch_cases(gen: torch.Generator) -> list:
    def order(n):
        return torch.randperm(n, generator=gen)

    return [Case("rank 0 of 2, step 0, B = 8", (order(40), 0, 0, 2, 8)),
            Case("rank 1 of 2, step 3, B = 8", (order(40), 3, 1, 2, 8)),
            Case("rank 2 of 4, step 2, B = 12", (order(60), 2, 2, 4, 12)),
            Case("rank 0 of 1 (one process), step 1, B = 6", (order(20), 1, 0, 1, 6))]


EXERCISES: dict[str, Exercise] = {
    "rank_loss": Exercise(
        reference=rank_loss,
        make_cases=_rank_loss_cases,
        sources=(rank_loss,),
        outputs=("loss",),
        pitfalls=(
            Pitfall("S1", "the rank's own mean",
                    lambda loss, mask, n, w: loss.masked_fill(~mask, 0).sum() / mask.sum(),
                    "that is the mean over THIS rank's tokens: averaged by DDP it becomes a "
                    "mean of means, which weighs a token of a rank with fewer tokens more. "
                    "Divide the rank's sum by the tokens of the whole global batch "
                    "(global_tokens), then undo DDP's averaging."),
            Pitfall("S2", "DDP's average forgotten",
                    lambda loss, mask, n, w: loss.masked_fill(~mask, 0).sum() / n,
                    "right for one process, but DDP AVERAGES the gradients of the W ranks, so "
                    "this gradient ends up W times too small: multiply by world_size."),
            Pitfall(None, "padding counted",
                    lambda loss, mask, n, w: loss.sum() * w / n,
                    "the padded positions have losses too (the model still predicts there): "
                    "keep only the real tokens, where mask is True."),
            Pitfall("S1", "the rank's own mean, times W",
                    lambda loss, mask, n, w: loss[mask].mean() * w,
                    "that is W times the mean over THIS rank's tokens: averaged by DDP it is "
                    "still a mean of means. Divide the rank's SUM by global_tokens, the real "
                    "tokens of the whole global batch, then multiply by world_size."),
            Pitfall(None, "divided by W",
                    lambda loss, mask, n, w: loss[mask].sum() / (n * w),
                    "DDP divides the sum of the ranks' gradients by W; to undo it, MULTIPLY "
                    "by world_size: W * S_r / N."),
            Pitfall(None, "not divided by N",
                    lambda loss, mask, n, w: loss[mask].sum() * w,
                    "divide by global_tokens (N): one process minimises the MEAN over the "
                    "global batch's real tokens, W S_r / N."),
            Pitfall(None, "a mean over every position",
                    lambda loss, mask, n, w: (loss * mask).mean() * w,
                    "(loss * mask).mean() divides by every position, padding included: sum "
                    "the real tokens' losses and divide by global_tokens."),
        ),
    ),
    "average_gradients": Exercise(
        reference=ddp_all_reduce,
        make_cases=lambda gen: [AllReduceCase(label, kind=kind) for kind, label in KINDS.items()],
        sources=(average_gradients,),
        outputs=("gradients",),
        time_limit=120,  # two new processes, each importing torch
        pitfalls=(
            Pitfall("S5", "summed, not averaged", _summed,
                    "dist.all_reduce ADDS the tensors of all ranks (its default op is SUM): "
                    "divide by the world size, dist.get_world_size(), to get DDP's average."),
            Pitfall(None, "no all-reduce", _divided_only,
                    "dist.all_reduce(tensor) replaces the tensor, in place on every rank, by "
                    "the sum over the ranks; without it each rank keeps the gradient of its "
                    "own pairs only."),
            Pitfall(None, "the weights all-reduced", _weights_reduced,
                    "you all-reduced the weights (p or p.data), so every p.grad is still its "
                    "rank's own gradient: all-reduce the gradients, p.grad. The weights are the "
                    "same on every rank already; the gradients differ (each rank saw its own "
                    "pairs).", shows=_left(lambda how: "weight" in how["reduced"])),
            Pitfall(None, "the averages returned", _averages_returned,
                    "every p.grad is still its rank's own gradient: you returned the averages, "
                    "but the optimizer (and check) read p.grad, and what the function returns "
                    "is dropped. Average in place: dist.all_reduce(p.grad), then "
                    "p.grad /= dist.get_world_size().",
                    shows=_left(lambda how: how["returned"])),
            Pitfall(None, "a copy all-reduced", _copy_reduced,
                    "every p.grad is still its rank's own gradient: dist.all_reduce changes "
                    "the tensor you give it, and you gave it a copy (p.grad.clone(), a "
                    "torch.cat, ...). All-reduce p.grad itself, or copy the result back with "
                    "p.grad.copy_(...).", shows=_left(lambda how: "other" in how["reduced"])),
            Pitfall(None, "nothing changed", _nothing_stored,
                    "your function changed no gradient: every p.grad is still its rank's own. "
                    "It must call dist.all_reduce(p.grad) (in place: it returns nothing to "
                    "keep) and divide in place, p.grad /= dist.get_world_size(); p.grad / W "
                    "alone makes a new tensor that is dropped.",
                    shows=_left(lambda how: not how["reduced"] and not how["returned"])),
        ),
    ),
    "rank_batch": Exercise(
        reference=rank_batch,
        make_cases=_rank_batch_cases,
        sources=(rank_batch,),
        outputs=("items",),
        pitfalls=(
            Pitfall("S3", "every rank takes the whole batch",
                    lambda o, s, r, w, b: o[s * b:(s + 1) * b],
                    "every rank got the whole global batch: the W copies train on the same "
                    "pairs and the run is no faster than one process (what happens without a "
                    "DistributedSampler). Rank r takes every W-th item of the block, from r."),
            Pitfall("S4", "steps advanced by the rank's share",
                    lambda o, s, r, w, b: o[s * (b // w) + r:s * (b // w) + b:w],
                    "step s starts at s * (B / W): a step overlaps the one before, so pairs are "
                    "seen twice and others never. The global batch B moves on by B every step."),
            Pitfall(None, "the step ignored",
                    lambda o, s, r, w, b: o[r:b:w],
                    "step s uses the block order[s * B:(s + 1) * B]: move the start on by the "
                    "global batch B at every step."),
            Pitfall(None, "the rank ignored",
                    lambda o, s, r, w, b: o[s * b:(s + 1) * b:w],
                    "every rank took the same items: rank r starts at item r of the block, "
                    "order[s * B + r:(s + 1) * B:W]."),
            Pitfall(None, "the end not moved with the step",
                    lambda o, s, r, w, b: o[s * b + r:b:w],
                    "the block of step s ENDS at (s + 1) * B, not at B: move both ends of the "
                    "slice with the step."),
            Pitfall(None, "contiguous pieces",
                    lambda o, s, r, w, b: o[s * b + r * (b // w):s * b + (r + 1) * (b // w)],
                    "your pieces do split the block between the ranks (a valid split), but not "
                    "as DistributedSampler deals: round-robin, rank r takes items r, r + W, "
                    "r + 2W, ... of the block."),
        ),
    ),
}
