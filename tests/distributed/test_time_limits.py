"""helpers.distributed.spawn and notebook 13's all-reduce check: a rendezvous of their own and a
time limit on everything they start.

- several spawns and checks started at the same moment, from separate processes, all finish
  with the right result within their limits (before, two of them could be handed one port);
- a rank that stalls (one that sleeps, or a learner's function that all-reduces on one rank
  only) ends with a clear error within the limit, and no process of it is left running;
- a rank's error comes back whole; bad limits are refused before any process starts.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import helpers.exercises.nb13 as nb13
from helpers.distributed import STOP_GRACE, spawn

ROOT = Path(__file__).resolve().parents[2]
CONTENDER = Path(__file__).with_name("contender.py")
MARGIN = 10  # seconds of slack on a loaded 2-core machine, beyond a limit and the stop's grace


def running(pid: int) -> bool:
    """Whether process ``pid`` is still running (one that ended, a zombie, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")  # Linux: the state of a zombie is Z
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def pids_in(folder: Path, expected: int) -> list:
    pids = [int(p.read_text()) for p in sorted(folder.glob("rank*.pid"))]
    assert len(pids) == expected, pids  # every rank started and said who it is
    return pids


# ----------------------------------------------------------------------------------------------
# spawn: bad limits, a rank's error, a stalled rank
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("limits, message", [
    ({"timeout": 0}, r"spawn: timeout must be a finite number of seconds > 0, got 0"),
    ({"timeout": math.inf}, r"spawn: timeout must be a finite number .* got inf"),
    ({"timeout": "60"}, r"spawn: timeout must be a finite number of seconds > 0, got .60."),
    ({"group_timeout": True}, r"spawn: group_timeout must be .* got True"),
    ({"group_timeout": -1.5}, r"spawn: group_timeout must be .* got -1.5"),
])
def test_bad_limits_are_refused_before_any_process_starts(limits, message):
    with pytest.raises(ValueError, match=message):
        spawn(2, argparse.Namespace(), job=None, **limits)


def test_a_world_size_below_one_is_refused():
    with pytest.raises(ValueError, match=r"spawn: world_size must be at least 1, got 0"):
        spawn(0, argparse.Namespace())


def _pid_job(rank, world_size, args):
    """Writes this rank's pid; then rank ``args.stalls`` sleeps (a stall outside any collective,
    or, with ``args.raises``, raises) while the other ranks wait for it in an all-reduce."""
    Path(args.folder, f"rank{rank}.pid").write_text(str(os.getpid()))
    if rank == args.stalls:
        if args.raises:
            raise ValueError("the first line of the rank's error\nand its second line")
        time.sleep(3600)
    dist.all_reduce(torch.ones(1))


@pytest.mark.slow
def test_a_rank_that_never_finishes_is_stopped_at_the_deadline(tmp_path):
    args = argparse.Namespace(threads=1, folder=tmp_path, stalls=1, raises=False)
    start = time.monotonic()
    with pytest.raises(TimeoutError) as caught:
        spawn(2, args, _pid_job, timeout=8, group_timeout=120)  # rank 0 waits in all_reduce
    seconds = time.monotonic() - start
    message = str(caught.value)
    assert "spawn: ranks 0, 1 of 2 did not finish within 8 s" in message
    assert "(rank 0: running _pid_job; rank 1: running _pid_job)" in message
    assert "a collective called by some ranks only" in message  # what to look for
    assert "spawn(..., timeout=seconds)" in message
    assert 8 <= seconds < 8 + STOP_GRACE + MARGIN, seconds
    assert not [pid for pid in pids_in(tmp_path, 2) if running(pid)]


@pytest.mark.slow
def test_a_rank_left_waiting_in_a_collective_raises_after_the_group_timeout(tmp_path):
    args = argparse.Namespace(threads=1, folder=tmp_path, stalls=1, raises=False)
    start = time.monotonic()
    with pytest.raises(RuntimeError) as caught:
        spawn(2, args, _pid_job, timeout=120, group_timeout=3)
    seconds = time.monotonic() - start
    message = str(caught.value)
    assert message.startswith("spawn: rank 0 of 2 raised an error (rank 0: running _pid_job; "
                              "rank 1: running _pid_job); all its processes were stopped.")
    assert "It waited in a collective that another rank did not join" in message
    assert "Timed out waiting 3000ms" in message  # gloo's own words, in the whole traceback
    assert 3 <= seconds < 3 + STOP_GRACE + MARGIN, seconds  # then rank 1 is stopped
    assert not [pid for pid in pids_in(tmp_path, 2) if running(pid)]


@pytest.mark.slow
def test_a_ranks_error_comes_back_whole_and_stops_the_others(tmp_path):
    args = argparse.Namespace(threads=1, folder=tmp_path, stalls=1, raises=True)
    start = time.monotonic()
    with pytest.raises(RuntimeError) as caught:
        spawn(2, args, _pid_job, group_timeout=120)  # rank 0 would wait 120 s for rank 1
    message = str(caught.value)
    assert message.startswith("spawn: rank 1 of 2 raised an error (rank 0: running _pid_job; "
                              "rank 1: running _pid_job)")
    assert "waited in a collective" not in message  # its own error, not a wait
    assert 'raise ValueError("the first line of the rank\'s error\\nand its second line")' \
        in message  # the traceback, down to the line that raised
    assert message.endswith("ValueError: the first line of the rank's error\nand its second "
                            "line\n")
    assert time.monotonic() - start < STOP_GRACE + MARGIN
    assert not [pid for pid in pids_in(tmp_path, 2) if running(pid)]


# ----------------------------------------------------------------------------------------------
# The all-reduce check: a learner's function that stalls on one rank
# ----------------------------------------------------------------------------------------------

def rank_0_only(model):
    """Rank 0 all-reduces, rank 1 returns at once: rank 0 waits for it."""
    import os
    from pathlib import Path

    Path(os.environ["TFS_PIDS"], f"rank{dist.get_rank()}.pid").write_text(str(os.getpid()))
    if dist.get_rank() == 0:
        for p in model.parameters():
            if p.grad is not None:
                dist.all_reduce(p.grad)
                p.grad /= 2


def rank_1_sleeps(model):
    """Rank 1 never returns (nor all-reduces): rank 0 waits for it, and so does the check."""
    import os
    import time
    from pathlib import Path

    Path(os.environ["TFS_PIDS"], f"rank{dist.get_rank()}.pid").write_text(str(os.getpid()))
    if dist.get_rank() == 1:
        time.sleep(3600)
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= 2


@pytest.mark.slow
@pytest.mark.xdist_group("all-reduce check")  # with test_all_reduce_checker.py: one reference
def test_an_all_reduce_on_one_rank_only_gets_a_clear_message(run_check, tmp_path, monkeypatch):
    monkeypatch.setenv("TFS_PIDS", str(tmp_path))
    run_check("average_gradients", nb13.average_gradients)  # the reference: not timed
    start = time.monotonic()
    passed, text = run_check("average_gradients", rank_0_only)
    seconds = time.monotonic() - start
    assert not passed
    assert ("your function raised RuntimeError: rank 0 waited in dist.all_reduce for rank 1, "
            "which returned without joining it: every rank must call the same collectives, in "
            "the same order [case: a small Transformer") in text
    assert seconds < nb13.COLLECTIVE_TIMEOUT + MARGIN, seconds
    assert not [pid for pid in pids_in(tmp_path, 2) if running(pid)]


@pytest.mark.slow
@pytest.mark.xdist_group("all-reduce check")
def test_a_rank_that_never_returns_is_stopped_at_the_checks_limit(run_check, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setenv("TFS_PIDS", str(tmp_path))
    monkeypatch.setattr(nb13, "CHECK_TIMEOUT", 10)  # instead of 60 s, to keep the test short
    monkeypatch.setattr(nb13, "COLLECTIVE_TIMEOUT", 5)
    run_check("average_gradients", nb13.average_gradients)  # the reference: not timed
    start = time.monotonic()
    passed, text = run_check("average_gradients", rank_1_sleeps)
    seconds = time.monotonic() - start
    assert not passed
    assert ("your function raised TimeoutError: it had not returned on rank 1 after 10 s, so "
            "both processes were stopped: does it wait there for something that the other "
            "rank never does?") in text
    # once for all three cases: the first one's processes are stopped, the others told so
    assert 10 <= seconds < 10 + STOP_GRACE + MARGIN, seconds
    assert not [pid for pid in pids_in(tmp_path, 2) if running(pid)]


# ----------------------------------------------------------------------------------------------
# Under contention: several learners at once
# ----------------------------------------------------------------------------------------------

CONTENDERS = 3
ROUNDS = 3


@pytest.mark.slow
def test_concurrent_spawns_and_checks_all_finish_with_the_right_results(tmp_path):
    """3 processes, each 3 rounds of a spawn and an all-reduce check, all at the same moment
    (after every one has started its fork server): 9 spawns and 9 checks (each check one more
    spawn, the first also the reference's) meet at once on 2 cores."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    tags = [f"learner{i}" for i in range(CONTENDERS)]
    started = [subprocess.Popen([sys.executable, str(CONTENDER), tag, str(ROUNDS), str(tmp_path),
                                 str(CONTENDERS)], cwd=ROOT, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for tag in tags]
    try:
        done = [process.communicate(timeout=400) for process in started]
    finally:
        for process in started:
            process.kill()  # only if still running: a hang must not outlive the test
            process.wait()
    figures = []
    for tag, process, (out, err) in zip(tags, started, done, strict=True):
        assert process.returncode == 0, f"{tag}:\n{err[-3000:]}"
        results = [json.loads(line[len("RESULT "):]) for line in out.splitlines()
                   if line.startswith("RESULT ")]
        assert [(r["call"], r["round"]) for r in results] == [
            (call, i) for i in range(ROUNDS) for call in ("spawn", "check")]
        for r in results:
            if r["call"] == "spawn":  # both ranks in this job's own group
                assert r["tags"] == [f"{tag}/{r['round']}"] * 2 and r["sum"] == 3.0, r
                assert r["seconds"] < 60, r  # contender.SPAWN_LIMIT
            else:
                assert r["passed"], r["printed"]
                assert r["seconds"] < nb13.CHECK_TIMEOUT, r
        figures.append(" ".join(f"{r['call']} {r['seconds']:.1f}" for r in results))
    print("seconds of each call:\n" + "\n".join(figures))
