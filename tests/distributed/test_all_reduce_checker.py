"""Notebook 13's all-reduce exercise: ``check`` runs the learner's ``average_gradients`` in two
gloo processes (started by ``helpers.distributed.spawn``) and compares both ranks' gradients with
DDP's after one step. An answer written independently passes, a sum not divided by W gets S5's
hint, an error inside the new processes comes back by name (sys.exit with its usual advice), and
an untouched stub starts no process at all."""

import pytest
import torch
import torch.distributed as dist

from helpers.distributed import average_gradients

# Every check starts two processes: the slow tier (.ci/run). One worker runs them all (and the
# registry's tests of this exercise): the reference's gradients, computed by its first check,
# serve every later one.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("all-reduce check")]


def average_in_one_buffer(model):
    """All gradients in one flat buffer, one all-reduce, copied back."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.flatten() for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    start = 0
    for g in grads:
        g.copy_(flat[start:start + g.numel()].view_as(g))
        start += g.numel()


def summed_only(model):  # S5
    for p in model.parameters():
        if p.requires_grad:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)


def uses_a_notebook_name(model):
    for p in model.parameters():
        p.grad /= WORLD  # noqa: F821 (a name of the learner's notebook, not of the new process)


def test_the_reference_equals_ddp_and_an_answer_written_differently_passes(run_check):
    passed, text = run_check("average_gradients", average_gradients)
    assert passed, text
    passed, text = run_check("average_gradients", average_in_one_buffer)
    assert passed, text


def test_a_sum_not_divided_gets_its_hint(run_check):
    passed, text = run_check("average_gradients", summed_only)
    assert not passed and "[S5]" in text and "divide by the world size" in text


def test_an_error_in_the_new_processes_comes_back_by_name(run_check):
    passed, text = run_check("average_gradients", uses_a_notebook_name)
    assert not passed
    assert "your function raised NameError: name 'WORLD' is not defined" in text


def exits(model):
    import sys

    sys.exit()  # ends the process where it runs: here, a rank


def test_sys_exit_in_the_new_processes_gets_the_usual_advice(run_check):
    passed, text = run_check("average_gradients", exits)
    assert not passed
    assert "your function raised SystemExit" in text
    assert "Exit() and sys.exit() end the program: return the result instead" in text


def test_a_stub_or_a_lambda_starts_no_process(run_check, monkeypatch):
    import helpers.exercises.nb13 as nb13

    started = []  # the functions sent to each pair of new processes, by key

    def recorded(n, args, job, **limits):
        started.append(sorted(args.functions))
        return spawn(n, args, job, **limits)

    spawn = nb13.spawn
    monkeypatch.setattr(nb13, "spawn", recorded)

    def untouched(model):
        raise NotImplementedError  # your code here

    passed, text = run_check("average_gradients", untouched)
    assert not passed and "not attempted yet" in text
    assert started == []  # a stub is told apart before anything runs
    passed, text = run_check("average_gradients", lambda model: model.zero_grad())
    assert not passed and "write it with def" in text
    # The reference may have been started (when no earlier test of this process ran it), the
    # lambda never: it is refused before any process would receive it.
    assert all("yours" not in keys for keys in started), started
