"""``check`` names an answer that edits its inputs in place, even when its values are right: the
caller's tensor would change too (and autograd refuses in-place edits of tensors it needs)."""

import contextlib
import io

import pytest
import torch

from helpers.exercises import check
from helpers.exercises.engine import Case, NumberCase, all_exercises


def run(name, fn):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ok = check(name, fn)
    return ok, out.getvalue()


def add_in_place(x, pe):
    return x.add_(pe[:x.shape[1]])


def zero_head_in_place(merged, head, num_heads):
    d_k = merged.shape[-1] // num_heads
    merged[..., head * d_k:(head + 1) * d_k] = 0
    return merged


def shift_right_in_place(target, bos_id):
    target[:, 1:] = target[:, :-1].clone()
    target[:, 0] = bos_id
    return target


@pytest.mark.parametrize("name, fn, argument", [
    ("add_positional_encoding", add_in_place, "`x`"),
    ("zero_head", zero_head_in_place, "`merged`"),
    ("shift_right", shift_right_in_place, "`target`"),
])
def test_an_answer_that_edits_its_input_is_named(name, fn, argument):
    ok, out = run(name, fn)
    assert ok is False
    assert out.startswith(f"❌ {name}: right values, but your function changed its input "
                          f"{argument} in place")
    assert "Hint: build a new tensor" in out


def test_the_same_answers_written_without_editing_their_inputs_pass():
    assert run("add_positional_encoding", lambda x, pe: x + pe[:x.shape[1]])[0]
    assert run("shift_right", lambda target, bos_id: shift_right_in_place(target.clone(),
                                                                          bos_id))[0]


@pytest.mark.parametrize("name, exercise", all_exercises().items())
def test_no_reference_edits_the_inputs_of_its_plain_cases(name, exercise):
    """The probe is fair: every reference leaves the tensors of its plain cases as they were."""
    for case in exercise.cases():
        if type(case) not in (Case, NumberCase):
            continue
        args = [a.clone() if torch.is_tensor(a) else a for a in case.args]
        exercise.reference(*args, **case.kwargs)
        for before, after in zip(case.args, args, strict=True):
            if torch.is_tensor(before):
                assert torch.equal(before.nan_to_num(), after.nan_to_num()), case.label
