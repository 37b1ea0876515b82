"""The course's translator trained by PyTorch's distributed engine (DistributedDataParallel).

    torchrun --standalone --nproc_per_node 2 -m helpers.distributed --steps 50 --batch-size 64
    python -m helpers.distributed --single --steps 50 --batch-size 64  # the same, one process
    python -m helpers.distributed --bench  # steps/s: 1 vs 2 processes, float32 vs bfloat16

Each of the W ranks holds a copy of the model and takes B / W pairs of each global batch of B;
DDP all-reduces the gradients during ``backward`` (``--by-hand``: after it), so the copies stay
identical. ``--accumulate k`` runs a rank's pairs in k pieces, ``--bf16`` the forward in bfloat16;
``--fsdp`` shards the model, ``--save DIR`` writes a sharded checkpoint (:mod:`helpers.fsdp`).
Shapes: ``b`` pairs in a piece, ``T`` target length, ``V`` target vocabulary.
"""

import argparse
import contextlib
import gc
import json
import math
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import timedelta
from multiprocessing import connection, forkserver
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from .checks import check_sizes
from .data import PAD_ID, encode_pairs, make_batch
from .fsdp import local_parameters, save_sharded, shard, whole_tensor
from .model import TransformerConfig, build_model
from .training import make_optimizer
from .translation import CORPUS_ARGS, make_corpus
from .utils import set_seed

EXAMPLE = "--steps 50 --batch-size 64"

# Time limits in seconds (PyTorch's: 30 minutes for a collective, none for the processes).
GROUP_TIMEOUT = 60  # a rank waits this long for the others: at the rendezvous, in a collective
SPAWN_TIMEOUT = 600  # spawn waits this long for all its processes (a whole training run)
STOP_GRACE = 3  # a rank being stopped gets this long to end on SIGTERM, before SIGKILL


def parse_args(argv=None) -> argparse.Namespace:
    """The command line's options, also the ``args`` of the functions below."""
    small = TransformerConfig.small()
    p = argparse.ArgumentParser(prog="python -m helpers.distributed", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add = p.add_argument
    for name, default in [("steps", 50), ("batch-size", 64), ("accumulate", 1), ("warmup", 200),
                          ("seed", 0), ("print-every", 10), ("num-train", 20000)]:
        add("--" + name, type=int, default=default)  # --batch-size: all ranks together
    for name, default in [("lr-scale", 1.0), ("clip-norm", 1.0), ("label-smoothing", 0.1),
                          ("dropout", small.dropout)]:
        add("--" + name, type=float, default=default)
    for name in ("d_model", "num_heads", "num_layers", "d_ff"):
        add("--" + name.replace("_", "-"), type=int, default=getattr(small, name))
    add("--backend", choices=["gloo", "nccl"], default="gloo", help="nccl: one CUDA GPU a rank")
    add("--bf16", action="store_true", help="forward under autocast in bfloat16")
    add("--fsdp", action="store_true", help="shard the model with FSDP instead of DDP")
    add("--by-hand", action="store_true", help="no DDP: average_gradients after backward")
    add("--save", help="a folder: the trained weights as a torch.distributed.checkpoint")
    add("--threads", type=int, help="torch threads in each process")
    add("--log-json", help="JSON log by rank 0 (not --log: torchrun would take it)")
    add("--single", action="store_true", help="one process, no torchrun, no process group")
    add("--bench", action="store_true", help="run benchmark() instead of training")
    return p.parse_args(argv)


def micro_batch_size(batch_size: int, world_size: int, accumulate: int = 1) -> int:
    """Pairs in one forward pass, ``batch_size / world_size / accumulate``, or a ValueError."""
    check_sizes("helpers.distributed", batch_size=batch_size, world_size=world_size,
                accumulate=accumulate)
    if batch_size % world_size:
        raise ValueError(f"the batch size {batch_size} is not divisible by the world size "
                         f"{world_size}: every rank must get as many sentence pairs")
    per_rank = batch_size // world_size
    if per_rank % accumulate:
        raise ValueError(f"each rank's {per_rank} pairs (batch size {batch_size} / world size "
                         f"{world_size}) are not divisible by --accumulate {accumulate}")
    return per_rank // accumulate


def micro_batches(dataset, rank: int, world_size: int, per_rank: int, seed: int = 0):
    """Endless lists of ``per_rank`` items of ``dataset``: rank ``rank``'s share of each step.
    The sampler deals one permutation per epoch round-robin, so the W shares of step s are the
    block ``[s*B, (s+1)*B)`` of the permutation: the batch of W = 1."""
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True,
                                 seed=seed, drop_last=True)
    loader = DataLoader(dataset, batch_size=per_rank, sampler=sampler, drop_last=True,
                        collate_fn=list)  # a list of pairs: each piece is padded on its own
    if len(loader) == 0:
        raise ValueError(f"{len(dataset)} items cannot fill one batch of {per_rank * world_size}")
    for epoch in range(sys.maxsize):
        sampler.set_epoch(epoch)  # a new permutation every epoch
        yield from loader


@contextlib.contextmanager
def process_group(rank: int, world_size: int, backend: str = "gloo"):
    """Join the default process group at ``MASTER_ADDR:MASTER_PORT`` (each wait: ``GROUP_TIMEOUT`` s
    at most) when ``world_size > 1`` and none exists yet; leave it at the end if joined here."""
    joined = world_size > 1 and not dist.is_initialized()
    if joined:
        dist.init_process_group(backend, rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=GROUP_TIMEOUT))
    try:
        yield
    finally:
        if joined:
            dist.destroy_process_group()


def wrap_model(model, args, device):
    """The model as this rank trains it: in DDP, which copies rank 0's weights to every rank
    and all-reduces the gradients during ``backward``; sharded by FSDP with ``--fsdp``; as it
    is with ``--by-hand`` (:func:`average_gradients` after ``backward``) or in one process."""
    if not dist.is_initialized() or args.by_hand:
        return model
    if args.fsdp:
        return shard(model, device.type)
    return DDP(model, device_ids=[device.index] if device.type == "cuda" else None)


_PAIRS = {}  # num_train -> (encoded training pairs, the two vocabularies' sizes)


def _training_pairs(num_train: int) -> tuple:
    """The encoded training pairs and vocabulary sizes, built once (spawn hands them on)."""
    if num_train not in _PAIRS:
        corpus = make_corpus(**{**CORPUS_ARGS, "num_train": num_train})
        _PAIRS[num_train] = (encode_pairs(corpus.train, corpus.src_vocab, corpus.tgt_vocab),
                             (len(corpus.src_vocab), len(corpus.tgt_vocab)))
    return _PAIRS[num_train]


def _setup(rank: int, world_size: int, args):
    """Model (in DDP when W > 1), optimizer, schedule, this rank's data and its device."""
    device = torch.device("cpu")
    if args.backend == "nccl":
        if not torch.cuda.is_available():
            raise ValueError("--backend nccl needs CUDA GPUs; on CPUs use --backend gloo")
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
        torch.cuda.set_device(device)
    encoded, vocab_sizes = _training_pairs(args.num_train)
    config = TransformerConfig(args.d_model, args.num_heads, args.num_layers, args.d_ff,
                               args.dropout)
    set_seed(args.seed)  # the same initial weights everywhere (DDP also copies rank 0's)
    model = build_model(config, *vocab_sizes).to(device).train()
    torch.manual_seed(args.seed + rank)  # but each rank its own dropout masks
    model = wrap_model(model, args, device)
    optimizer, scheduler = make_optimizer(model, args.d_model, args.warmup, args.lr_scale)
    data = micro_batches(encoded, rank, world_size, args.batch_size // world_size, args.seed)
    return model, optimizer, scheduler, data, device


def rank_loss(token_losses: torch.Tensor, mask: torch.Tensor, global_tokens,
              world_size: int) -> torch.Tensor:
    """The loss one of W ranks backpropagates so that DDP's averaged gradient is one process's.

    ``token_losses (b, T)``: the loss of each target token of this rank's pairs; ``mask (b, T)``:
    True on real tokens, False on padding; ``global_tokens``: N, the real tokens of the whole
    global batch (all ranks). One process minimises (sum of all token losses) / N; DDP averages
    the W ranks' gradients, so each rank returns W S_r / N, S_r the sum of its own.
    """
    summed = token_losses.masked_fill(~mask, 0.0).sum()  # S_r: padding adds nothing
    return summed * world_size / global_tokens


def average_gradients(model) -> None:
    """DDP's all-reduce by hand, after ``backward``: every gradient becomes its mean over the
    ranks of the default process group, the same numbers on every rank."""
    world_size = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)  # the sum of the ranks' gradients
            p.grad /= world_size


def pieces_and_token_count(pairs: list, world_size: int, args, device) -> tuple[list, torch.Tensor]:
    """This rank's ``pairs`` as ``args.accumulate`` batches (the pieces), and N: the real target
    tokens of the global batch, all ranks together, which :func:`rank_loss` divides by."""
    size = micro_batch_size(args.batch_size, world_size, args.accumulate)
    pieces = [make_batch([s for s, _ in pairs[i:i + size]], [t for _, t in pairs[i:i + size]])
              .to(device) for i in range(0, len(pairs), size)]
    total = torch.stack([(p.tgt_out != PAD_ID).sum() for p in pieces]).sum().float()  # ours ...
    if dist.is_initialized():
        dist.all_reduce(total)  # ... then N, the real target tokens of all ranks
    return pieces, total


def gradient_sync(model, last: bool):
    """The context of one piece's forward and backward. Only the last piece's backward
    all-reduces the gradients (by then ``.grad`` holds the sum of all the pieces'): DDP's
    ``no_sync`` keeps the others from it (DDP decides in the forward), and FSDP is told the same."""
    if hasattr(model, "set_requires_gradient_sync"):  # FSDP's no_sync
        model.set_requires_gradient_sync(last)
    return model.no_sync() if isinstance(model, DDP) and not last else contextlib.nullcontext()


def forward_backward(model, pairs: list, world_size: int, args, device) -> float:
    """Forward and backward of this rank's ``pairs``, piece by piece; returns the loss of the
    global batch (the mean over its N real target tokens), the same on every rank. The pieces'
    gradients add up in ``.grad``; ``--by-hand`` averages them over the ranks at the end."""
    pieces, total = pieces_and_token_count(pairs, world_size, args, device)
    loss_sum = torch.zeros((), device=device)
    for i, piece in enumerate(pieces):
        with gradient_sync(model, last=i == len(pieces) - 1):
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16):
                logits = model(piece.src, piece.tgt_in, piece.src_mask, piece.tgt_mask)  # (b,T,V)
            # each token's label-smoothed loss (notebook 09), in float32: CPU autocast would
            # compute it in bfloat16
            token_losses = F.cross_entropy(logits.float().transpose(1, 2), piece.tgt_out,
                                           reduction="none",
                                           label_smoothing=args.label_smoothing)  # (b, T)
            real = piece.tgt_out != PAD_ID
            rank_loss(token_losses, real, total, world_size).backward()
        loss_sum += token_losses[real].sum().detach()
    if args.by_hand and dist.is_initialized():
        average_gradients(model)  # what DDP did during backward
    if dist.is_initialized():
        dist.all_reduce(loss_sum)
    return (loss_sum / total).item()


def gradients_after_one_step(rank: int, world_size: int, args) -> dict:
    """``{"loss": float, "grads": {name: tensor}}`` of the first step, after the all-reduce and
    before clipping, on the CPU: what W = 1 and W = 2 must agree on."""
    micro_batch_size(args.batch_size, world_size, args.accumulate)  # errors before joining
    with process_group(rank, world_size, args.backend):
        model, _, _, data, device = _setup(rank, world_size, args)
        loss = forward_backward(model, next(data), world_size, args, device)
        module = model.module if isinstance(model, DDP) else model
        return {"loss": loss, "grads": {name: whole_tensor(p.grad).cpu().clone()
                                        for name, p in module.named_parameters()}}


def train_distributed(rank: int, world_size: int, args) -> dict:
    """Train for ``args.steps`` steps; every rank returns the same history (each step's loss,
    lr and seconds, the speed, the sizes). Rank 0 prints a log and writes ``args.log_json``."""
    per_piece = micro_batch_size(args.batch_size, world_size, args.accumulate)
    check_sizes("helpers.distributed", steps=args.steps)  # no step: nothing to measure
    show = rank == 0 and args.print_every > 0
    with process_group(rank, world_size, args.backend):
        model, optimizer, scheduler, data, device = _setup(rank, world_size, args)
        wrapper = "one process" if world_size == 1 else "FSDP" if args.fsdp else "DDP"
        if show:
            print(f"{world_size} process(es), {args.backend}: batch {args.batch_size} = "
                  f"{world_size} x {args.accumulate} x {per_piece} pairs, "
                  f"{'bfloat16' if args.bf16 else 'float32'}, {wrapper}: "
                  f"this rank holds {local_parameters(model):,} parameter numbers", flush=True)
        steps = []
        for step in range(1, args.steps + 1):
            start, lr = time.perf_counter(), scheduler.get_last_lr()[0]
            optimizer.zero_grad(set_to_none=True)
            loss = forward_backward(model, next(data), world_size, args, device)
            if not math.isfinite(loss):  # all-reduced: every rank stops here
                raise ValueError(f"the loss is {loss} at step {step}: training diverged")
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_norm)
            optimizer.step()
            scheduler.step()
            steps.append({"step": step, "loss": loss, "lr": lr,
                          "seconds": time.perf_counter() - start})
            if show and (step % args.print_every == 0 or step in (1, args.steps)):
                print(f"step {step:5d}  loss {loss:.4f}  lr {lr:.2e}", flush=True)
        held = local_parameters(model)
        if args.save:  # every rank writes its part, inside the process group
            save_sharded(model, args.save)
    steps_per_s = 1 / statistics.median(s["seconds"] for s in steps[1:] or steps)
    history = {"world_size": world_size, "batch_size": args.batch_size, "bf16": args.bf16,
               "accumulate": args.accumulate, "micro_batch_size": per_piece,
               "backend": args.backend, "fsdp": args.fsdp, "parameters_per_rank": held,
               "steps": steps, "steps_per_s": steps_per_s,
               "samples_per_s": steps_per_s * args.batch_size}
    if show:
        print(f"{steps_per_s:.2f} steps/s, {history['samples_per_s']:.0f} samples/s", flush=True)
    if rank == 0 and args.log_json:
        Path(args.log_json).write_text(json.dumps({**history, "args": vars(args)}, indent=1))
    return history


def _rank_main(rank, world_size, port, group_timeout, job, args, path, pairs, environ):
    """One rank of :func:`spawn`: it writes its stage and any traceback to the parent's store
    and meets the other ranks there; rank 0 saves the result to ``path``."""
    os.environ.clear()  # the parent's environment as it is now, not the fork server's
    os.environ.update(environ)
    _PAIRS.update(pairs)
    store = dist.TCPStore(RENDEZVOUS_HOST, port, is_master=False,
                          timeout=timedelta(seconds=group_timeout))
    jobs = args if isinstance(args, list) else [args]
    try:
        if world_size > 1:
            store.set(f"stage/{rank}", "joining the process group")
            dist.init_process_group(getattr(jobs[0], "backend", "gloo"), store=store, rank=rank,
                                    world_size=world_size,
                                    timeout=timedelta(seconds=group_timeout))
        results = []
        for i, job_args in enumerate(jobs, 1):  # all in one process group
            store.set(f"stage/{rank}", f"running {getattr(job, '__name__', 'the job')}"
                      + (f" (job {i} of {len(jobs)})" if len(jobs) > 1 else ""))
            if job_args.threads:
                torch.set_num_threads(job_args.threads)
            results.append(job(rank, world_size, job_args))
        if world_size > 1:
            dist.destroy_process_group()
        if rank == 0:
            torch.save(results if isinstance(args, list) else results[0], path)
    except Exception:
        store.set(f"error/{rank}", traceback.format_exc())
        store.get(f"error/{rank}")  # a round trip: the store has it before this process ends
        sys.exit(1)  # the parent stops the other ranks and raises this error
    store.set(f"stage/{rank}", "finished")
    gc.freeze()  # skips the final collection: most of a second of CPU with torch and DDP


# What the fork server imports once for every process it starts: torch (about 2.5 s of CPU) and
# torch._dynamo, which DDP imports when it wraps a model (about 2 s more).
PRELOADED = ("torch", "torch.distributed", "torch._dynamo")
# Environment variables read when a process starts or imports torch: a process forked from the
# fork server has the values the server started with.
READ_AT_START = ("OMP_", "GOMP_", "KMP_", "MKL_", "PYTHON", "TORCH_", "PYTORCH_")
_server_environ = None  # those of the fork server, once it runs


def _read_at_start() -> dict:
    return {k: v for k, v in os.environ.items() if k.startswith(READ_AT_START)}


def start_method() -> str:
    """``"forkserver"`` (from a server that imported torch once), or ``"spawn"`` without one or
    once a variable of ``READ_AT_START`` changed since the server started."""
    global _server_environ
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    if _server_environ is None:
        multiprocessing.set_forkserver_preload(list(PRELOADED))
        forkserver.ensure_running()
        _server_environ = _read_at_start()
    return "forkserver" if _read_at_start() == _server_environ else "spawn"


RENDEZVOUS_HOST = "127.0.0.1"  # spawn's ranks all run on this machine
# How gloo words the error of a rank that waited in a collective for a rank that never came
GLOO_WAITED = ("Timed out waiting", "Connection closed by peer", "Connection reset by peer")


def spawn(world_size: int, args, job=train_distributed, timeout: float = SPAWN_TIMEOUT,
          group_timeout: float = GROUP_TIMEOUT):
    """Rank 0's result of ``job(rank, world_size, args)`` in ``world_size`` new processes (what
    torchrun does); a list of ``args``: one job each, in one process group, results as a list.
    A rank waits ``group_timeout`` seconds at most for the others, this process ``timeout``; a
    rank's error, or the deadline, stops them all with a RuntimeError or a TimeoutError."""
    check_sizes("spawn", world_size=world_size)
    for name, limit in (("timeout", timeout), ("group_timeout", group_timeout)):
        if (isinstance(limit, bool) or not isinstance(limit, (int, float))
                or not 0 < limit < math.inf):
            raise ValueError(f"spawn: {name} must be a finite number of seconds > 0, "
                             f"got {limit!r}")
    # Port 0: the system picks a free port
    store = dist.TCPStore(RENDEZVOUS_HOST, 0, is_master=True, wait_for_workers=False,
                          timeout=timedelta(seconds=group_timeout))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "result.pt"
        ranks = mp.start_processes(
            _rank_main, nprocs=world_size, start_method=start_method(), join=False,
            args=(world_size, store.port, group_timeout, job, args, path, dict(_PAIRS),
                  dict(os.environ)))
        _wait(ranks.processes, store, timeout)
        return torch.load(path, weights_only=False)


def _wait(processes, store, timeout: float) -> None:
    """Wait at most ``timeout`` seconds for spawn's ``processes`` to end well; a failed rank or
    the deadline stops them all and raises, saying where each rank was (from ``store``)."""
    world_size = len(processes)

    def read(key):  # what a rank wrote to the store in _rank_main, or None
        return store.get(key).decode() if store.check([key]) else None

    def where():
        return "; ".join(f"rank {r}: {read(f'stage/{r}') or 'starting'}"
                         for r in range(world_size))

    deadline = time.monotonic() + timeout
    try:
        while True:
            failed = [r for r, p in enumerate(processes) if p.exitcode]  # None: running
            if failed:
                break
            running = [p.sentinel for p in processes if p.exitcode is None]
            if not running:
                return  # all ended well
            if time.monotonic() >= deadline:
                late = [str(r) for r, p in enumerate(processes) if p.exitcode is None]
                raise TimeoutError(
                    f"spawn: rank{'s' * (len(late) > 1)} {', '.join(late)} of {world_size} "
                    f"did not finish within {timeout:g} s ({where()}); all its processes were "
                    "stopped. A rank stalls when it waits for a step that the others never "
                    "take (a collective called by some ranks only, an endless loop); a slow "
                    "but correct job needs a longer limit: spawn(..., timeout=seconds).")
            connection.wait(running, timeout=max(0.0, deadline - time.monotonic()))
    finally:
        _stop(processes)
    # The error to show: a rank's own, before that of a rank that only waited for it
    errors = {r: read(f"error/{r}") for r in range(world_size) if read(f"error/{r}")}
    own = [r for r, error in errors.items() if not any(w in error for w in GLOO_WAITED)]
    rank = (own or list(errors) or failed)[0]
    if rank not in errors:  # it ended without raising: killed, or sys.exit / os._exit
        code = processes[rank].exitcode
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        raise RuntimeError(f"spawn: rank {rank} of {world_size} ended with {how} ({where()}); "
                           "all its processes were stopped. Look for sys.exit or os._exit in "
                           "the job, or for the system running out of memory.")
    raise RuntimeError(
        f"spawn: rank {rank} of {world_size} raised an error ({where()}); all its processes "
        "were stopped." + ("" if rank in own else " It waited in a collective that another "
                           "rank did not join (within group_timeout, or before it ended): "
                           "every rank must make the same collective calls, in the same order.")
        + f" Its error:\n{errors[rank]}")


def _stop(processes) -> None:
    """End the processes still running: SIGTERM, then SIGKILL for one that ignores it."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    end = time.monotonic() + STOP_GRACE
    for process in processes:
        process.join(max(0.0, end - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def torchrun_command(nproc: int, *options) -> list:
    """The torchrun command as a list, run as ``python -m torch.distributed.run`` (no PATH)."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={nproc}", "-m", "helpers.distributed", *map(str, options)]


def launch(nproc: int, *options, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run :func:`torchrun_command` from the course's root folder and wait: the finished process
    (``stdout``: rank 0's log), or a RuntimeError with the end of its error output."""
    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    env.setdefault("OMP_NUM_THREADS", "1")  # what torchrun sets anyway, without its warning
    done = subprocess.run(torchrun_command(nproc, *options), cwd=root, env=env, text=True,
                          capture_output=True, timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"torchrun exited with {done.returncode}:\n{done.stderr[-3000:]}")
    return done


# (processes, torch threads in each, bfloat16): the same 2 cores used three ways, then bf16
BENCH_CONFIGS = ((1, 1, False), (1, 2, False), (2, 1, False), (1, 1, True), (1, 2, True))


def benchmark(args, configs=BENCH_CONFIGS) -> list:
    """The speed of ``args``' training for each ``(processes, threads, bf16)`` of ``configs``."""
    rows = []
    for world_size, threads, bf16 in configs:
        history = spawn(world_size, argparse.Namespace(**{
            **vars(args), "threads": threads, "bf16": bf16, "log_json": None, "print_every": 0}))
        rows.append({"processes": world_size, "threads": threads, "bf16": bf16,
                     "steps_per_s": history["steps_per_s"],
                     "samples_per_s": history["samples_per_s"],
                     "final_loss": history["steps"][-1]["loss"]})
        print(f"{world_size} process(es) x {threads} thread(s), {'bf16' if bf16 else 'fp32'}: "
              f"{history['steps_per_s']:6.2f} steps/s {history['samples_per_s']:7.0f} samples/s"
              f"  final loss {rows[-1]['final_loss']:.4f}", flush=True)
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.bench:
        benchmark(args)
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    missing = [v for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK") if v not in os.environ]
    if missing and not args.single:
        print(f"helpers.distributed runs one process per rank, started by torchrun, which sets "
              f"RANK, WORLD_SIZE and LOCAL_RANK ({', '.join(missing)} missing here). Launch it "
              f"with:\n    torchrun --standalone --nproc_per_node 2 -m helpers.distributed "
              f"{EXAMPLE}\nor train as one process without torchrun:\n"
              f"    python -m helpers.distributed --single {EXAMPLE}", file=sys.stderr)
        return 2
    ranks = (0, 1) if args.single else (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    train_distributed(*ranks, args)
    return 0


if __name__ == "__main__":
    code = main()
    gc.freeze()  # skips the final collection: most of a second of CPU with torch and DDP
    sys.exit(code)
