"""One of several learners working at the same moment, started by test_time_limits.py (not a test
module itself): each round, a spawn of two processes that all-gather their job's tag, then a
check of average_gradients with an answer of its own (one pair of processes per check).

    python tests/distributed/contender.py TAG ROUNDS FOLDER HOW_MANY

Before its first round it starts its fork server (a first spawn), writes ``FOLDER/TAG.ready``
and waits until HOW_MANY such files exist: every contender's rounds begin at the same moment.
It prints one JSON line per call, ``{"call", "round", "seconds", ...}``, after "RESULT ".
"""

import contextlib
import io
import json
import sys
import time
from argparse import Namespace
from pathlib import Path

import torch
import torch.distributed as dist

from helpers.distributed import spawn
from helpers.exercises import check

SPAWN_LIMIT = 60  # seconds for each spawn of the tiny job (it takes 0.2-3 s)
READY_LIMIT = 180  # seconds to wait for the other contenders to be ready


def tags_job(rank, world_size, args):
    """Every rank's tag, as this rank's process group sees them, and the sum of the ranks + 1:
    ranks of two different jobs at one rendezvous would see each other's tags."""
    tags = [None] * world_size
    dist.all_gather_object(tags, args.tag)
    total = torch.tensor([rank + 1.0])
    dist.all_reduce(total)
    return {"tags": tags, "sum": total.item()}


def warm_up(rank, world_size, args):
    """Nothing: the first spawn waits for its fork server to import torch."""


def my_average_gradients(model):
    """A learner's own answer (not the reference object: the check runs it every time)."""
    world_size = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= world_size


def report(**fields) -> None:
    print("RESULT " + json.dumps(fields), flush=True)


def main(tag: str, rounds: int, folder: Path, how_many: int) -> None:
    spawn(1, Namespace(threads=1), warm_up)  # the fork server, up before the others are awaited
    (folder / f"{tag}.ready").touch()
    deadline = time.monotonic() + READY_LIMIT
    while len(list(folder.glob("*.ready"))) < how_many:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{tag}: the other contenders were not ready in {READY_LIMIT} s")
        time.sleep(0.05)
    for i in range(rounds):
        start = time.perf_counter()
        result = spawn(2, Namespace(threads=1, tag=f"{tag}/{i}"), tags_job, timeout=SPAWN_LIMIT)
        report(call="spawn", round=i, seconds=time.perf_counter() - start, **result)
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            passed = check("average_gradients", my_average_gradients)
        report(call="check", round=i, seconds=time.perf_counter() - start, passed=passed,
               printed=printed.getvalue())


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
