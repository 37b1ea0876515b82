"""Notebook 10's ``greedy_decode`` checker: the reference (with its KV cache), answers written
differently and the buggy variants, on a small random model whose rows end at different steps."""

import torch

from helpers.decoding import greedy_decode
from helpers.exercises import engine


def greedy_row_by_row(model, src, max_len, bos_id, eos_id, src_mask=None):
    """Correct, written differently: one sentence at a time through model(...), then padded."""
    model.eval()
    rows = []
    with torch.no_grad():
        for b in range(src.shape[0]):
            mask = None if src_mask is None else src_mask[b:b + 1]
            ys = [bos_id]
            while len(ys) <= max_len and ys[-1] != eos_id:
                logits = model(src[b:b + 1], torch.tensor([ys]), mask)  # (1, t, V)
                ys.append(int(logits[0, -1].argmax()))
            rows.append(ys)
    width = max(map(len, rows))
    return torch.tensor([row + [eos_id] * (width - len(row)) for row in rows])


def test_reference_with_and_without_cache_and_another_answer_pass(run_check):
    def uncached(*args, **kwargs):
        return greedy_decode(*args, **kwargs, use_cache=False)

    for fn in (greedy_decode, uncached, greedy_row_by_row):
        ok, out = run_check("greedy_decode", fn)
        assert ok is True, out


def test_the_cases_end_at_different_steps_and_one_never_ends():
    exercise = engine.lookup("greedy_decode")
    for case in exercise.cases()[:3]:
        out = case.run(exercise.reference)
        ends = [(row == 2).nonzero()[0].item() if (row == 2).any() else None for row in out]
        assert len(set(ends)) > 1 or ends == [None] * len(ends)
    assert exercise.cases()[2].run(exercise.reference).shape[1] == 1 + 8  # cut at max_len


def test_the_model_is_the_same_on_every_check(run_check):
    first = engine.lookup("greedy_decode").cases()[0].args[0].state_dict()
    second = engine.lookup("greedy_decode").cases()[0].args[0].state_dict()
    assert all(torch.equal(first[k], second[k]) for k in first)
