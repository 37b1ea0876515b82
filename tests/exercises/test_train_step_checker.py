"""Notebook 09's ``train_step`` checker: the case runs the learner's step three times on a fresh
model and compares losses, weights and learning rate with the reference's."""

import math

import torch

from helpers.training import train_step


def step_written_differently(model, batch, loss_fn, optimizer, scheduler, clip_norm):
    """Correct, in another style: gradients zeroed in place, clipping by hand, float()."""
    for p in model.parameters():
        if p.grad is not None:
            p.grad.zero_()
    loss = loss_fn(model, batch)
    loss.backward()
    norm = torch.sqrt(sum(p.grad.pow(2).sum() for p in model.parameters()))
    scale = min(1.0, clip_norm / (norm.item() + 1e-6))
    for p in model.parameters():
        p.grad.mul_(scale)
    optimizer.step()
    scheduler.step()
    return float(loss.detach())


def test_reference_and_another_correct_step_pass(run_check):
    for fn in (train_step, step_written_differently):
        ok, out = run_check("train_step", fn)
        assert ok is True, out


def test_no_clipping_at_all_fails():
    """The cases clip for real: a step without clipping gives other weights."""
    def no_clip(model, batch, loss_fn, optimizer, scheduler, clip_norm):
        optimizer.zero_grad()
        loss = loss_fn(model, batch)
        loss.backward()
        optimizer.step()
        scheduler.step()
        return loss.item()

    from helpers.exercises import check
    assert check("train_step", no_clip) is False


def test_a_nan_loss_and_a_wrong_return_are_reported(run_check):
    ok, out = run_check("train_step", lambda *args: math.nan)
    assert ok is False and "got NaN for losses at index (0,)" in out
    ok, out = run_check("train_step", lambda *args: "done")
    assert ok is False and "expected a tuple (losses, weights, learning rate, where the " \
        "gradients were clipped" in out and "got a str" in out


def test_the_step_sees_a_fresh_model_every_time(run_check):
    """Two checks in a row give the same verdict: nothing leaks from one run to the next."""
    assert run_check("train_step", train_step)[0] and run_check("train_step", train_step)[0]


def test_a_step_that_returns_the_loss_tensor_is_refused_with_its_hint(run_check):
    """The exercise asks for a float: the loss tensor (graph and all) is refused by name."""
    def tensor_back(model, batch, loss_fn, optimizer, scheduler, clip_norm):
        optimizer.zero_grad()
        loss = loss_fn(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        optimizer.step()
        scheduler.step()
        return loss

    ok, out = run_check("train_step", tensor_back)
    assert ok is False and "got a tensor of shape ()" in out
    assert "return loss.item(), a float, not the loss tensor" in out
