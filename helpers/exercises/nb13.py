"""Notebook 13's exercises: a rank's share of a step (``rank_batch``: S3, S4), the loss of one
rank (``rank_loss``: S1, S2), and DDP's all-reduce by hand (``average_gradients``: S5), run in
two gloo processes and compared with DDP itself. Slips are edits of the references."""

import builtins
import inspect
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
from .cases import exercise, slips
from .compare import Raised, _raised_by_course, whole
from .engine import Case, Exercise
from .stubs import is_stub


def rank_batch(order: torch.Tensor, step: int, rank: int, world_size: int,
               batch_size: int) -> torch.Tensor:
    """Rank ``rank``'s items at step ``step`` of ``order`` (the epoch's permutation), as
    ``DistributedSampler`` deals: items r, r + W, ... of the block ``order[s*B : (s+1)*B]``."""
    start = step * batch_size  # the global batch advances by B every step
    return order[start + rank:start + batch_size:world_size]


def _rank_batch_cases(gen: torch.Generator) -> list:
    shared = torch.randperm(40, generator=gen)  # cases 0 and 1: both ranks of one step
    return [Case("rank 1 of 2, step 3, B = 8", (shared, 3, 1, 2, 8)),
            Case("rank 0 of 2, step 3, B = 8", (shared, 3, 0, 2, 8)),
            Case("rank 2 of 4, step 2, B = 12", (torch.randperm(60, generator=gen), 2, 2, 4, 12)),
            Case("rank 0 of 1 (one process), step 1, B = 6",
                 (torch.randperm(20, generator=gen), 1, 0, 1, 6))]


def _ranks_differ(outcomes) -> bool:  # shows: cases 0 and 1 (two ranks) got different items
    return not all(torch.is_tensor(o) for o in outcomes[:2]) or not torch.equal(*outcomes[:2])


def _rank_loss_cases(gen: torch.Generator) -> list:
    def rank(b, T, real, N, W):
        mask = torch.arange(T)[None, :] < torch.tensor(real)[:, None]  # (b, T) padding at the end
        losses = torch.rand(b, T, generator=gen) * 5  # padding's losses are not 0 either
        return (losses, mask, N, W)

    return [Case("rank 0 of 2: 3 pairs, 12 of all 30 tokens", rank(3, 6, [6, 4, 2], 30, 2)),
            Case("rank 1 of 2: 2 pairs, 18 of all 30 tokens", rank(2, 9, [9, 9], 30, 2)),
            Case("rank 3 of 4: 4 pairs, 11 of all 40 tokens", rank(4, 5, [5, 3, 2, 1], 40, 4)),
            Case("one process (W = 1): its own 14 tokens", rank(2, 7, [7, 7], 14, 1))]


# ---- average_gradients: two processes; the frozen model last, so that an answer that fails
# there only keeps the other cases' results -----------------------------------------------------
KINDS = {"transformer": "a small Transformer, 4 sentence pairs of its own on each rank",
         "mlp": "a 2-layer MLP, 3 examples on rank 0 and 5 on rank 1",
         "frozen": "the Transformer with its source embedding frozen (its .grad stays None)"}
# Seconds, below the exercise's time_limit (120 s), so that these end first, with clearer
# messages, and stop the processes. A correct answer takes 1-5 s.
COLLECTIVE_TIMEOUT = 30  # a rank waits this long in a collective that the other never joins
CHECK_TIMEOUT = 90  # the check waits this long for its two processes, then stops them


def ddp_all_reduce(model) -> None:
    """What an answer must match: the model wrapped in DDP, which all-reduces in ``backward``."""


def _step(kind: str, rank: int, world_size: int):
    """The model of ``kind`` (the same weights on every rank) and this rank's loss function."""
    gen = torch.Generator().manual_seed(7)
    torch.manual_seed(0)
    if kind == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        x, y = torch.randn(8, 3, generator=gen), torch.randn(8, 2, generator=gen)
        mine = slice(0, 3) if rank == 0 else slice(3, 8)  # unequal shares: 3 and 5 examples
        return model, lambda m: rank_loss((m(x[mine]) - y[mine]).pow(2).sum(dim=1),
                                          torch.ones(len(x[mine]), dtype=torch.bool), len(x),
                                          world_size)
    model = build_model(TransformerConfig(16, 2, 1, 32, 0.0), 11, 13)
    model.src_embed.weight.requires_grad_(kind != "frozen")
    lengths = torch.randint(1, 7, (16,), generator=gen).tolist()
    pairs = [(torch.randint(4, 11, (n,), generator=gen).tolist(),
              torch.randint(4, 13, (8 - n,), generator=gen).tolist()) for n in lengths[:8]]
    tokens = int((make_batch(*zip(*pairs)).tgt_out != PAD_ID).sum())  # N, of all ranks
    b = make_batch(*zip(*pairs[rank::world_size]))  # as DistributedSampler deals

    def loss(m):
        losses = F.cross_entropy(m(b.src, b.tgt_in, b.src_mask, b.tgt_mask).transpose(1, 2),
                                 b.tgt_out, reduction="none")  # (b, T)
        return rank_loss(losses, b.tgt_out != PAD_ID, tokens, world_size)
    return model, loss


def _gradients(model) -> torch.Tensor:
    """Every trainable parameter's gradient, flat (a missing one as zeros)."""
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten()
                      for p in model.parameters() if p.requires_grad])


def _watched(fn, model) -> set:
    """Call ``fn(model)`` and say what it did: all-reduced a "grad", a "weight" or an "other"
    tensor, "returned" something, "changed" a gradient (the slips that change none differ)."""
    before = _gradients(model).clone()
    grads = {p.grad.data_ptr() for p in model.parameters() if p.grad is not None}
    weights = {p.data_ptr() for p in model.parameters()}
    did, real = set(), dist.all_reduce

    def recording(tensor, *args, **kwargs):
        ptr = tensor.data_ptr() if torch.is_tensor(tensor) else None
        did.add("grad" if ptr in grads else "weight" if ptr in weights else "other")
        return real(tensor, *args, **kwargs)

    dist.all_reduce = recording  # the learner's dist.all_reduce, however it was imported
    try:
        if fn(model) is not None:
            did.add("returned")
    finally:
        dist.all_reduce = real
    if not torch.equal(before, _gradients(model)):
        did.add("changed")
    return did


def _sent_back(error: BaseException, model) -> BaseException:
    """``error`` rebuilt as a builtin type (else a RuntimeError naming it), with ``collective``:
    the ``torch.distributed`` call it came out of; ``whole``: raised in helpers/; ``none_grad``."""
    where = [f.f_code for f, _ in traceback.walk_tb(error.__traceback__)]
    called = [c.co_name for c in where if c.co_filename == distributed_c10d.__file__
              and not c.co_name.startswith("_") and c.co_name != "wrapper"]
    name = type(error).__name__
    kind = getattr(builtins, name, None)
    ok = isinstance(kind, type) and issubclass(kind, (Exception, SystemExit))
    try:  # the builtin type, unless it takes more than a message (UnicodeDecodeError)
        sent = kind(str(error)) if ok else RuntimeError(f"{name}: {error}")
    except TypeError:
        sent = RuntimeError(f"{name}: {error}")
    sent.collective, sent.whole = next(iter(called), None), _raised_by_course(error)
    sent.none_grad = any(p.grad is None for p in model.parameters())
    return sent


def _source(fn):
    """The learner's ``fn`` as a new process can receive it, its name and source (a notebook
    cell's function cannot be pickled)."""
    if getattr(fn, "__name__", "<lambda>") == "<lambda>":
        raise TypeError("check runs your function in two new processes from its source: "
                        "write it with def, in a cell of its own")
    try:
        return fn.__name__, textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as error:
        raise TypeError(f"check runs your function in two new processes and needs its "
                        f"source, which Python cannot find ({error})") from None


def _gradients_job(rank: int, world_size: int, args) -> None:
    """In each process: one step of each model per function (DDP for :func:`ddp_all_reduce`),
    saved to a file per rank, so that a rank left waiting by the other cannot hide them."""
    results = {}
    try:
        for key, sent in args.functions.items():  # the learner's alone, or the known ones
            if isinstance(sent, str):
                fn = KNOWN[sent]
            else:  # the learner's source, run with torch, nn and dist as its only names
                namespace = {"torch": torch, "dist": dist, "nn": torch.nn}
                exec(compile(sent[1], f"<your {sent[0]}>", "exec"), namespace)  # noqa: S102
                fn = namespace[sent[0]]
            for i, kind in enumerate(args.kinds):
                model, loss = _step(kind, rank, world_size)
                wrapped = DDP(model) if fn is ddp_all_reduce else model  # alive until backward
                loss(wrapped).backward()
                try:
                    how = _watched(fn, model)
                    results[kind, key] = (_gradients(model), how)
                except (Exception, SystemExit) as error:  # noqa: BLE001 (sent back as it is)
                    failure = _sent_back(error, model)
                    results.update({(k, key): failure for k in args.kinds[i:]})
                    break  # the other rank may be waiting in a collective: not another one
    finally:
        torch.save(results, Path(args.folder) / f"rank{rank}.pt")


def _run(functions: dict) -> list:
    """``{key: function}`` -> ``[rank 0's results, rank 1's]``, within ``CHECK_TIMEOUT`` s."""
    with tempfile.TemporaryDirectory() as folder:
        files = [Path(folder) / f"rank{r}.pt" for r in (0, 1)]
        sent = {key: key if key in KNOWN else _source(fn) for key, fn in functions.items()}
        try:
            spawn(2, Namespace(threads=1, kinds=list(KINDS), folder=folder, functions=sent),
                  _gradients_job, timeout=CHECK_TIMEOUT, group_timeout=COLLECTIVE_TIMEOUT)
        except TimeoutError:
            if "yours" not in functions:
                raise
            late = " and ".join(str(r) for r, file in enumerate(files) if not file.exists())
            raise whole(TimeoutError(f"it had not returned on rank {late or '0 and 1'} after "
                                     f"{CHECK_TIMEOUT} s, so both processes were stopped: does "
                                     "it wait there for something that the other rank never "
                                     "does?")) from None
        return [torch.load(file, weights_only=False) for file in files]


_KNOWN_RANKS, _PENDING = [], {}  # both ranks' results of the known functions; the learner's


def _results(fn, kind: str) -> list:
    """Both ranks' results for ``fn`` on model ``kind``: the known functions run together, once;
    a learner's once per check, so that what stopped its processes is each case's outcome."""
    key = next((k for k, known in KNOWN.items() if known is fn), "yours")
    if key != "yours":
        if not _KNOWN_RANKS:
            _KNOWN_RANKS.extend(_run(KNOWN))
        ranks = _KNOWN_RANKS
    else:
        if kind not in _PENDING.get(fn, {}):
            _PENDING.clear()
            try:
                _PENDING[fn] = dict.fromkeys(KINDS, _run({"yours": fn}))
            except Exception as error:  # noqa: BLE001 (a TimeoutError, or a rank that crashed)
                _PENDING[fn] = dict.fromkeys(KINDS, error)
        ranks = _PENDING[fn].pop(kind)
        if isinstance(ranks, Exception):
            raise ranks
    return [results[kind, key] for results in ranks]


@dataclass(frozen=True)
class AllReduceCase(Case):
    """Both ranks' gradients ``(2, n)`` after one step of the model ``kind`` and the function,
    with ``.how``, what the function did (:func:`_watched`), for the pitfalls' ``shows``."""

    kind: str = "transformer"

    def run(self, fn):
        if fn is not ddp_all_reduce and is_stub(fn):  # untouched: no processes to start
            return fn(torch.nn.Linear(1, 1))
        outcomes = _results(fn, self.kind)
        failures = [(r, o) for r, o in enumerate(outcomes) if isinstance(o, BaseException)]
        own = [failure for _, failure in failures if failure.collective is None]
        if own or len(failures) == len(outcomes):  # the learner's own error (a NameError...)
            raise own[0] if own else failures[0][1]
        if failures:  # a rank waited in a collective for one that returned
            rank, failure = failures[0]
            raise whole(RuntimeError(f"rank {rank} waited in dist.{failure.collective} for "
                                     f"rank {1 - rank}, which returned without joining it: "
                                     "every rank must call the same collectives, in the same "
                                     "order"))
        gradients = torch.stack([grads for grads, _ in outcomes])
        gradients.how = set().union(*(how for _, how in outcomes))
        return gradients


def _left(done):  # shows: no p.grad changed nor all-reduced, and ``done`` (None: nothing) done
    return lambda outcomes: all(hasattr(o, "how") and not o.how & {"changed", "grad"}
                                and (done in o.how if done else not o.how) for o in outcomes)


def _frozen_failed(outcomes) -> bool:  # right until the frozen model, whose None grad broke it
    *others, frozen = outcomes
    return (isinstance(frozen, Raised) and getattr(frozen.error, "none_grad", False)
            and not any(isinstance(o, Raised) for o in others))


EVERY, SUM = ("if p.grad is not None:", "if True:"), "dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)"
DIVIDE, COPY = "p.grad /= world_size", "grad = p.grad.clone()\n            dist.all_reduce(grad)"
FROZEN = ("a frozen parameter (requires_grad=False) gets no gradient: its p.grad is None, and "
          "neither dist.all_reduce nor a division takes None. Skip it, `if p.grad is not None:`, "
          "as DDP does.")
GRADIENT_SLIPS = slips(average_gradients, [
    ("S5", "summed, not averaged", (DIVIDE, "pass"), None),
    (None, "no all-reduce", (SUM, "pass"), "dist.all_reduce(tensor) replaces the tensor, in place "
     "on every rank, by the sum over the ranks; without it each rank keeps the gradient of its "
     "own pairs only."),
    (None, "None all-reduced", EVERY, FROZEN, _frozen_failed),
    (None, "None divided", [EVERY, (SUM, "p.grad.div_(world_size)\n            "
                                         "dist.all_reduce(p.grad)"), (DIVIDE, "pass")],
     FROZEN, _frozen_failed),
    # these leave every p.grad as it was: told apart by what they did
    (None, "the weights all-reduced", [(SUM, "dist.all_reduce(p.data)"),
                                       (DIVIDE, "p.data /= world_size")],
     "you all-reduced the weights (p or p.data), so every p.grad is still its rank's own "
     "gradient: all-reduce the gradients, p.grad. The weights are the same on every rank "
     "already; the gradients differ (each rank saw its own pairs).", _left("weight")),
    (None, "the averages returned", [("world_size = ", "averages = []\n    world_size = "),
                                     (SUM, COPY), (DIVIDE, "averages.append(grad / world_size)"
                                                           "\n    return averages")],
     "every p.grad is still its rank's own gradient: you returned the averages, but the "
     "optimizer (and check) read p.grad, and what the function returns is dropped. Average in "
     "place: dist.all_reduce(p.grad), then p.grad /= dist.get_world_size().", _left("returned")),
    (None, "a copy all-reduced", [(SUM, COPY), (DIVIDE, "grad /= world_size")],
     "every p.grad is still its rank's own gradient: dist.all_reduce changes the tensor you give "
     "it, and you gave it a copy (p.grad.clone(), a torch.cat, ...). All-reduce p.grad itself, "
     "or copy the result back with p.grad.copy_(...).", _left("other")),
    (None, "nothing changed", [(SUM, "pass"), (DIVIDE, "p.grad / world_size")],
     "your function changed no gradient: every p.grad is still its rank's own. It must call "
     "dist.all_reduce(p.grad) (in place: it returns nothing to keep) and divide in place, "
     "p.grad /= dist.get_world_size(); p.grad / W alone makes a new tensor that is dropped.",
     _left(None)),
])
SAME = "start + rank:start + batch_size:world_size"
EXERCISES: dict[str, Exercise] = {
    "rank_batch": exercise(
        rank_batch, _rank_batch_cases, "items",
        ("S3", "every rank takes the whole block", (SAME, "start:start + batch_size"), None),
        ("S3", "the rank ignored", ("start + rank:", "start:"), None),
        ("S3", "every rank the first piece", (SAME, "start:start + batch_size // world_size"),
         None),
        ("S4", "steps advanced by the rank's share",
         ("step * batch_size", "step * (batch_size // world_size)"), None),
        (None, "the step ignored", ("step * batch_size", "0"), "step s uses the block "
         "order[s * B:(s + 1) * B]: move the start on by the global batch B at every step."),
        (None, "the end not moved with the step", ("start + batch_size:", "batch_size:"),
         "the block of step s ENDS at (s + 1) * B, not at B: move both ends of the slice with "
         "the step."),
        (None, "contiguous pieces", (SAME, "start + rank * (batch_size // world_size):"
                                            "start + (rank + 1) * (batch_size // world_size)"),
         "your pieces do split the block between the ranks (a valid split), but not as "
         "DistributedSampler deals: round-robin, rank r takes items r, r + W, r + 2W, ... of the "
         "block.", _ranks_differ),
    ),
    "rank_loss": exercise(
        rank_loss, _rank_loss_cases, "loss",
        ("S1", "the rank's own mean", ("* world_size / global_tokens", "/ mask.sum()"), None),
        ("S2", "DDP's average forgotten", ("* world_size / global_tokens", "/ global_tokens"),
         None),
        (None, "padding counted", (".masked_fill(~mask, 0.0)", ""), "the padded positions have "
         "losses too (the model still predicts there): keep only the real tokens, where mask is "
         "True."),
        ("S1", "the rank's own mean, times W", ("/ global_tokens", "/ mask.sum()"), None),
        (None, "divided by W", ("* world_size / global_tokens", "/ (global_tokens * world_size)"),
         "DDP divides the sum of the ranks' gradients by W; to undo it, MULTIPLY by world_size: "
         "W * S_r / N."),
        (None, "not divided by N", (" / global_tokens", ""), "divide by global_tokens (N): one "
         "process minimises the MEAN over the global batch's real tokens, W S_r / N."),
        (None, "a mean over every position", ("/ global_tokens", "/ mask.numel()"),
         "(loss * mask).mean() divides by every position, padding included: sum the real "
         "tokens' losses and divide by global_tokens."),
    ),
    "average_gradients": Exercise(  # time_limit: two new processes, each importing torch
        ddp_all_reduce, lambda gen: [AllReduceCase(label, kind=k) for k, label in KINDS.items()],
        GRADIENT_SLIPS, (average_gradients,), ("gradients",), time_limit=120),
}
# The reference's and the variants' functions, by the names the new processes know them by
KNOWN = {f"known{i}": fn for i, fn in enumerate([ddp_all_reduce, average_gradients, *(
    p.variant for p in GRADIENT_SLIPS)])}
