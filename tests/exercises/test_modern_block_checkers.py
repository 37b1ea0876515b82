"""Notebook 12's checkers (rms_norm, apply_rope, filter_logits) and notebook 13's (rank_loss,
rank_batch): correct answers written differently from the references pass, and each pitfall is
named."""

import torch
import torch.nn.functional as F


def rms_norm_functional(x, weight, eps=1e-6):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)  # PyTorch's own


def rope_complex(x, angles):
    """Each pair (x[2i], x[2i+1]) as a complex number, times e^(i angle)."""
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2)


def filter_with_a_loop(logits, temperature, top_p):
    out = torch.full_like(logits, float("-inf"))
    scaled = logits / temperature
    for row in range(len(logits)):
        probs = scaled[row].softmax(-1)
        total = 0.0
        for index in probs.argsort(descending=True).tolist():
            out[row, index] = scaled[row, index]
            total += probs[index].item()
            if total >= top_p:
                break
    return out


def rank_loss_by_mean(token_losses, mask, global_tokens, world_size):
    return token_losses[mask].mean() * mask.sum() * world_size / global_tokens


def rank_batch_by_index(order, step, rank, world_size, batch_size):
    block = order[step * batch_size:(step + 1) * batch_size]
    return block[torch.arange(rank, batch_size, world_size)]


def test_answers_written_differently_pass(run_check):
    for name, fn in [("rms_norm", rms_norm_functional), ("apply_rope", rope_complex),
                     ("filter_logits", filter_with_a_loop), ("rank_loss", rank_loss_by_mean),
                     ("rank_batch", rank_batch_by_index)]:
        passed, text = run_check(name, fn)
        assert passed, (name, text)


def test_each_pitfall_is_named(run_check):
    def centred(x, weight, eps=1e-6):  # G1
        return F.layer_norm(x, (x.shape[-1],), weight, None, eps)

    def halves(x, angles):  # G2
        a, b = x.chunk(2, dim=-1)
        return torch.cat([a * angles.cos() - b * angles.sin(),
                          a * angles.sin() + b * angles.cos()], dim=-1)

    def temperature_last(logits, temperature, top_p):  # G3
        return filter_with_a_loop(logits, 1.0, top_p) / temperature

    cases = [("rms_norm", centred, "[G1]"), ("apply_rope", halves, "[G2]"),
             ("filter_logits", temperature_last, "[G3]")]
    for name, fn, pitfall in cases:
        passed, text = run_check(name, fn)
        assert not passed and pitfall in text, (name, text)
