"""The exercise engine (helpers/exercises/engine.py, compare.py) on chosen examples: the messages
for each kind of wrong answer, diagnosis, deterministic output, unknown names, ``solution``'s
headers, and the building blocks ``NumberCase`` and ``tensor_reference``.

What holds for every exercise is in test_exercise_registry.py; the time limit, a forgotten
return and SystemExit are in tests/core/test_bad_input.py.
"""

import pytest
import torch
import torch.nn.functional as F

from helpers.exercises import all_exercises, check, engine, solution
from helpers.exercises.engine import NumberCase, lookup, tensor_reference
from helpers.masks import causal_mask


def variant(name, pid, label=None):
    return next(p.variant for p in lookup(name).pitfalls
                if p.id == pid and (label is None or p.name == label))


def test_hints_come_from_diagnosis_not_from_the_generic_message(run_check, monkeypatch):
    """If diagnosis were broken, the registry's tests would catch it: the hint would be missing."""
    name, hint = "layer_norm", "is your epsilon inside the square root?"
    n2 = variant(name, "N2", "eps outside the square root")
    ok, out = run_check(name, n2)
    assert not ok and hint in out and "[N2]" in out
    monkeypatch.setattr(engine, "_diagnose", lambda *args: None)
    ok, out = run_check(name, n2)
    assert not ok
    assert hint not in out and "[N2]" not in out
    assert 'solution("layer_norm") shows one answer' in out


def test_wrong_shape_message_for_a_missing_transpose(run_check):
    ok, out = run_check("split_heads", lambda x, h: x.view(*x.shape[:2], h, -1))
    assert ok is False
    assert "expected shape (2, 4, 5, 6), got (2, 5, 4, 6)" in out
    assert "transpose(1, 2)" in out


def test_float_causal_mask_gets_the_bool_hint(run_check):
    ok, out = run_check("causal_mask", lambda n: torch.tril(torch.ones(n, n)))
    assert ok is False
    assert "expected dtype torch.bool, got torch.float32" in out
    assert "return a bool tensor" in out


def test_attention_returning_only_the_output_is_a_failure(run_check):
    learner = lambda q, k, v, mask=None: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ok, out = run_check("scaled_dot_product_attention", learner)
    assert ok is False
    assert "expected a tuple (out, weights), got a tensor of shape (2, 3, 5)" in out


def test_a_list_instead_of_a_tensor_is_a_failure(run_check):
    ok, out = run_check("causal_mask", lambda n: causal_mask(n).tolist())
    assert ok is False
    assert "expected a torch.Tensor, got a list of length 5" in out


def test_none_in_some_cases_only_is_a_missing_return(run_check):
    reference = lookup("scaled_dot_product_attention").reference

    def learner(q, k, v, mask=None):
        if mask is not None:
            return reference(q, k, v, mask)

    ok, out = run_check("scaled_dot_product_attention", learner)
    assert ok is False
    assert "your function returned None — did you forget `return`? [case: no mask" in out


def test_not_a_function_is_a_failure(run_check):
    ok, out = run_check("causal_mask", causal_mask(3))
    assert ok is False
    assert "without parentheses; got a tensor of shape (3, 3)" in out


def test_unknown_names_raise_a_value_error_listing_the_known_ones():
    with pytest.raises(ValueError, match="known exercises: .*causal_mask.*split_heads"):
        check("causal_mask_typo", lambda n: None)
    with pytest.raises(ValueError, match="unknown exercise 'nope'"):
        solution("nope")


def test_learner_prints_are_silenced(run_check):
    def learner(scores, mask):
        print("debugging", scores.shape)
        return scores.masked_fill(~mask, torch.finfo(scores.dtype).min).softmax(-1) * mask

    ok, out = run_check("masked_softmax", learner)
    assert ok is True
    assert "debugging" not in out and out.count("\n") == 1


def test_an_input_edited_in_place_is_named_even_with_right_values(run_check):
    def learner(scores, mask):  # right values, but the caller's scores change
        scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
        return scores.softmax(-1) * mask

    ok, out = run_check("masked_softmax", learner)
    assert ok is False
    assert "changed its input `scores` in place" in out


def test_unrecognised_bug_gets_the_first_wrong_value(run_check):
    def odd(n):  # the right mask, plus the last key for every query: no slip a learner writes
        ones = torch.ones(n, n, dtype=torch.bool)
        return ones.tril() | ones.triu(n - 1)

    ok, out = run_check("causal_mask", odd)
    assert ok is False
    assert "wrong value at index (0, 4): expected False, got True [case: size 5]" in out
    assert 'solution("causal_mask") shows one answer' in out


def test_wrong_values_report_position_and_largest_difference(run_check):
    def shifted(x, w, b, eps=1e-5):
        mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
        return (x - mean) / (var + eps).sqrt() * w + b + 0.5
    ok, out = run_check("layer_norm", shifted)
    assert ok is False
    assert "wrong value at index (0, 0, 0): expected " in out
    assert "(largest difference 0.5)" in out
    assert "input shapes (2, 3, 6), (6,), (6,)" in out


def test_output_is_deterministic_and_global_rng_untouched(run_check):
    state = torch.get_rng_state()
    bug = variant("scaled_dot_product_attention", "A1", "no scaling")
    first = run_check("scaled_dot_product_attention", bug)
    second = run_check("scaled_dot_product_attention", bug)
    assert first == second and first[0] is False
    assert torch.equal(torch.get_rng_state(), state)


def test_all_exercises_follow_the_static_map():
    assert list(all_exercises()) == list(engine.MODULES)
    assert lookup("padding_mask") is all_exercises()["padding_mask"]


# --------------------------------------------------------------------------------------------
# solution(): where the code lives
# --------------------------------------------------------------------------------------------

def test_solution_says_where_the_code_lives(capsys):
    solution("layer_norm")
    assert capsys.readouterr().out.startswith("# From helpers/layers.py\ndef layer_norm(")
    solution("feed_forward")
    out = capsys.readouterr().out
    assert out.startswith("# From helpers/exercises/nb04.py\ndef feed_forward(")
    assert "# From helpers/layers.py" not in out  # FeedForward is a cell of its own, not the answer


@pytest.mark.parametrize("name, start", [
    ("count_parameters", "# From helpers/exercises/nb08.py\n"
                         "def count_parameters(d_model: int, num_heads: int, d_ff: int, "
                         "num_layers: int, src_vocab: int,\n"
                         "                     tgt_vocab: int) -> int:\n"),
    ("transformer_lr", "# From helpers/training.py\ndef transformer_lr("),
])
def test_solution_shows_the_formula_under_the_exercise_name_not_the_wrapper(capsys, name, start):
    """The references that return a tensor wrap a function returning a number: solution shows
    that function, under the name the notebook uses (count_parameters, not total_parameters,
    its name in nb08.py, kept as long so that the signature stays aligned)."""
    solution(name)
    out = capsys.readouterr().out
    assert out.startswith(start)
    assert "torch.tensor" not in out and "total_parameters" not in out


# --------------------------------------------------------------------------------------------
# The building blocks
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, answer, expected", [
    (torch.int64, 1788, torch.tensor(1788)),
    (torch.int64, 1788.0, torch.tensor(1788)),
    (torch.int64, 1788.5, torch.tensor(1788.5, dtype=torch.float64)),
    (torch.float32, 2, torch.tensor(2.0)),
    (torch.float32, 0.25, torch.tensor(0.25)),
])
def test_number_case_turns_a_plain_number_into_a_tensor(dtype, answer, expected):
    got = NumberCase("a number", (3,), dtype=dtype).run(lambda n: answer)
    assert got.dtype == expected.dtype and got.shape == () and got.item() == expected.item()


@pytest.mark.parametrize("answer", [True, "1788", None, (1, 2), torch.tensor([1.0])])
def test_number_case_leaves_other_answers_alone(answer):
    assert NumberCase("a number", dtype=torch.int64).run(lambda: answer) is answer


def test_tensor_reference_returns_a_0d_tensor_and_keeps_the_name():
    def twice(n: int) -> int:
        return 2 * n

    reference = tensor_reference(twice, torch.float32)
    assert torch.equal(reference(3), torch.tensor(6.0))
    assert tensor_reference(twice)(3).dtype == torch.int64
    assert reference.__name__ == "twice" and reference.__wrapped__ is twice


def test_the_reference_runs_once_per_case_whatever_the_number_of_checks(monkeypatch, capsys):
    """``check`` keeps the reference's outcomes from its first call (the cases are the same on
    every call: tests/exercises/test_exercise_registry.py), so a learner's second check costs one
    run of their function, and a wrong answer still gets its hint."""
    import dataclasses

    calls = []
    exercise = lookup("causal_mask")

    def counted(*args, **kwargs):
        calls.append(args)
        return exercise.reference(*args, **kwargs)

    copy = dataclasses.replace(exercise, reference=counted)
    monkeypatch.setattr(engine, "lookup", lambda name: copy)
    assert check("causal_mask", exercise.reference) and check("causal_mask", exercise.reference)
    wrong = check("causal_mask", exercise.pitfalls[0].variant)
    assert len(calls) == len(exercise.cases())  # once per case, over three checks
    assert wrong is False and exercise.pitfalls[0].hint[:40] in capsys.readouterr().out


def test_a_reference_that_fails_is_named_and_not_kept(run_check, monkeypatch):
    """A reference cannot fail on its own cases; when the machine makes it fail (a time limit of
    processes it starts, on a busy machine), the learner is told so, not handed a crash, and the
    next check computes the reference again instead of keeping the failure."""
    exercise = lookup("causal_mask")
    right, real_call = exercise.reference, engine._call

    def busy(fn, case):  # the reference's runs fail; the learner's go through _call_learner
        return engine.Raised(TimeoutError("the machine was busy"))

    engine._REFERENCE_OUTCOMES.pop(id(exercise), None)
    monkeypatch.setattr(engine, "_call", busy)
    ok, out = run_check("causal_mask", right)
    assert not ok
    assert "the reference answer itself failed on a test case" in out
    assert "TimeoutError: the machine was busy" in out and "Run the check again" in out
    assert id(exercise) not in engine._REFERENCE_OUTCOMES  # not kept
    monkeypatch.setattr(engine, "_call", real_call)
    ok, out = run_check("causal_mask", right)
    assert ok, out  # the next check computes the reference again


def test_check_with_use_hands_on_the_answer_once_it_passes(capsys):
    from helpers.attention import scaled_dot_product_attention
    from helpers.exercises import check

    def my_attention(q, k, v, mask=None):
        raise NotImplementedError

    assert check("scaled_dot_product_attention", my_attention, use=True) \
        is scaled_dot_product_attention
    assert "Until yours passes, the cells below run the course's" in capsys.readouterr().out

    def yours(q, k, v, mask=None):
        return scaled_dot_product_attention(q, k, v, mask)

    assert check("scaled_dot_product_attention", yours, use=True) is yours
    assert "From here on, the cells below run your `yours`" in capsys.readouterr().out
