"""Exercise checkers: the reference passes, every buggy variant fails WITH its hint, stubs are
"not attempted yet", and nothing a learner writes makes ``check`` raise.

The buggy variants live in the registry (``helpers.exercises.EXERCISES``); these tests iterate
over it, so a new exercise is covered automatically. The explicit table ``PITFALL_HINTS`` names
every pitfall id (helpers/pitfalls.py) with the hint text a learner must see.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from helpers import exercises
from helpers.exercises import EXERCISES, check, solution
from helpers.layers import FeedForward
from helpers.masks import causal_mask
from helpers.positional import PositionalEncoding, sinusoidal_encoding

NAMES = sorted(EXERCISES)
VARIANTS = [pytest.param(name, pitfall, id=f"{name}-{pitfall.id or '-'}-{pitfall.name}")
            for name in NAMES for pitfall in EXERCISES[name].pitfalls]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: torch's thread pool only adds wake-ups (10x slower on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def run_check(capsys, name, fn):
    """``check`` plus what it printed."""
    result = check(name, fn)
    return result, capsys.readouterr().out


def first_case_output(name):
    """The reference's output on the first case, and that case."""
    exercise = EXERCISES[name]
    case = exercise.cases()[0]
    return case.run(exercise.reference), case


def altered_reference(name, change):
    """The reference with ``change`` applied to its (first) output tensor."""
    exercise = EXERCISES[name]

    def learner(*args, **kwargs):
        out = exercise.reference(*args, **kwargs)
        if isinstance(out, tuple):
            return (change(out[0]), *out[1:])
        return change(out)

    return learner


def first_tensor(output):
    return output[0] if isinstance(output, tuple) else output


def where(name):
    """' for out' for tuple outputs (the checker names the element), '' otherwise."""
    outputs = EXERCISES[name].outputs
    return f" for {outputs[0]}" if len(outputs) > 1 else ""


# --------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------

# Every pitfall id (helpers/pitfalls.py) that an exercise can catch, with the exercise and a
# piece of the hint that the learner must see.
PITFALL_HINTS = [
    ("A1", "scaled_dot_product_attention", "square root of the key dimension of one head"),
    ("A2", "scaled_dot_product_attention", "mask the scores before softmax"),
    ("A2", "masked_softmax", "mask the scores before softmax"),
    ("A3", "scaled_dot_product_attention", "True means may attend"),
    ("A3", "masked_softmax", "True means may attend"),
    ("A4", "scaled_dot_product_attention", "softmax over the last axis"),
    ("A4", "masked_softmax", "softmax over the last axis"),
    ("A5", "scaled_dot_product_attention", "what happens when a whole row is masked?"),
    ("A5", "masked_softmax", "what happens when a whole row is masked?"),
    ("P1", "sinusoidal_encoding", "the exponent is 2i/d_model where 2i is the even column index"),
    ("P2", "sinusoidal_encoding", "even columns sin, odd columns cos"),
    ("P2", "pe_rotation", "even columns sin, odd columns cos"),
    ("P3", "sinusoidal_encoding", "column 0 should be sin(position)"),
    ("P4", "add_positional_encoding", "slice positions, not features"),
    ("P5", "sinusoidal_encoding", "PE[0] should be 0, 1, 0, 1, ..."),
    ("N1", "layer_norm", "use the biased variance (divide by d, not d-1)"),
    ("N2", "layer_norm", "is your epsilon inside the square root?"),
    ("N3", "layer_norm", "gain and bias have one value per feature"),
    ("N4", "layer_norm", "normalise each token's vector over its d_model features"),
    ("N5", "layer_norm", "only epsilon goes under the root"),
    ("H1", "split_heads", "did you split as view(B, L, h, d_k) and then transpose"),
    ("H2", "merge_heads", "transpose heads back next to d_k before reshaping"),
    ("M1", "causal_mask", "position t may see positions 0..t"),
    ("M2", "causal_mask", "the diagonal must be allowed"),
    ("M3", "padding_mask", "hide the padded keys: shape (B, 1, 1, L)"),
    ("M4", "padding_mask", "True means a real token you may attend to"),
]


CORE = {
    "scaled_dot_product_attention", "masked_softmax", "sinusoidal_encoding",
    "add_positional_encoding", "pe_rotation", "split_heads", "merge_heads", "layer_norm",
    "feed_forward", "causal_mask", "padding_mask",
}


def test_registry_covers_every_exercise_and_pitfall_id():
    """The core exercises' ids are all in the table (later notebooks' exercises have their
    own tests/test_exercises_NN.py; the parametrized tests here still run all of them)."""
    assert set(NAMES) >= CORE
    ids = {p.id for exercise in EXERCISES.values() for p in exercise.pitfalls}
    expected = {f"{letter}{n}" for letter, top in [("A", 5), ("P", 5), ("N", 5), ("H", 2),
                                                   ("M", 4)] for n in range(1, top + 1)}
    assert expected <= ids
    assert {(pid, name) for pid, name, _ in PITFALL_HINTS} == {
        (p.id, name) for name in CORE for p in EXERCISES[name].pitfalls if p.id}


def test_every_exercise_has_cases_and_pitfalls():
    for name, exercise in EXERCISES.items():
        assert len(exercise.cases()) >= 3, name
        assert exercise.pitfalls, name


# --------------------------------------------------------------------------------------------
# Right, wrong, and untouched answers
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_reference_passes(capsys, name):
    ok, out = run_check(capsys, name, EXERCISES[name].reference)
    assert ok is True
    assert out.startswith(f"✅ {name}: correct on all {len(EXERCISES[name].cases())} test cases")
    assert out.count("\n") == 1  # one message, one line


@pytest.mark.parametrize("name, pitfall", VARIANTS)
def test_buggy_variant_fails_with_its_hint(capsys, name, pitfall):
    ok, out = run_check(capsys, name, pitfall.variant)
    assert ok is False
    assert out.startswith(f"❌ {name}: ")
    assert pitfall.hint in out
    if pitfall.id:
        assert f"Hint [{pitfall.id}]: " in out
    assert out.count("\n") == 2  # the problem, then the hint


@pytest.mark.parametrize("pid, name, hint", PITFALL_HINTS)
def test_pitfall_is_diagnosed_with_the_pitfalls_md_hint(capsys, pid, name, hint):
    variants = [p for p in EXERCISES[name].pitfalls if p.id == pid]
    assert variants, f"{name} has no variant for {pid}"
    for pitfall in variants:
        ok, out = run_check(capsys, name, pitfall.variant)
        assert ok is False
        assert f"[{pid}]" in out and hint in out, out


def test_hints_come_from_diagnosis_not_from_the_generic_message(capsys, monkeypatch):
    """If diagnosis were broken, the tests above would catch it: the hint would be missing."""
    name, hint = "layer_norm", "is your epsilon inside the square root?"
    n2 = next(p for p in EXERCISES[name].pitfalls if p.id == "N2")
    ok, out = run_check(capsys, name, n2.variant)
    assert not ok and hint in out and "[N2]" in out
    monkeypatch.setattr(exercises, "_diagnose", lambda *args: None)
    ok, out = run_check(capsys, name, n2.variant)
    assert not ok
    assert hint not in out and "[N2]" not in out
    assert 'solution("layer_norm") shows one answer' in out


def stub_return_none(*args, **kwargs):
    return None  # your code here


def stub_not_implemented(*args, **kwargs):
    """Docstring."""
    # your code here
    raise NotImplementedError("your code here")


def stub_pass(*args, **kwargs):
    pass


def stub_none_tuple(*args, **kwargs):
    return None, None


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("stub", [stub_return_none, stub_not_implemented, stub_pass,
                                  stub_none_tuple, lambda *args, **kwargs: None])
def test_untouched_stub_is_not_attempted_yet(capsys, name, stub):
    ok, out = run_check(capsys, name, stub)
    assert ok is False
    assert out.startswith(f"⏳ {name}: not attempted yet")
    assert "❌" not in out and "✅" not in out


@pytest.mark.parametrize("name", NAMES)
def test_another_exception_is_a_failure_naming_it(capsys, name):
    def learner(*args, **kwargs):
        raise ValueError("boom: shapes do not line up")

    ok, out = run_check(capsys, name, learner)
    assert ok is False
    assert out.startswith(f"❌ {name}: your function raised ValueError: boom: shapes do not")
    assert "[case: " in out


@pytest.mark.parametrize("name", NAMES)
def test_wrong_shape_names_expected_and_given(capsys, name):
    expected, _ = first_case_output(name)
    expected_shape = tuple(first_tensor(expected).shape)
    ok, out = run_check(capsys, name, altered_reference(name, lambda t: t.unsqueeze(0)))
    assert ok is False
    assert f"expected shape {expected_shape}{where(name)}, got {(1, *expected_shape)}" in out
    assert "Print the shape after each step" in out


def test_wrong_shape_message_for_a_missing_transpose(capsys):
    ok, out = run_check(capsys, "split_heads", lambda x, h: x.view(*x.shape[:2], h, -1))
    assert ok is False
    assert "expected shape (2, 4, 5, 6), got (2, 5, 4, 6)" in out
    assert "transpose(1, 2)" in out


@pytest.mark.parametrize("name", NAMES)
def test_wrong_dtype_names_expected_and_given(capsys, name):
    expected, _ = first_case_output(name)
    dtype = first_tensor(expected).dtype
    other = torch.int64 if dtype == torch.bool else torch.float64
    ok, out = run_check(capsys, name, altered_reference(name, lambda t: t.to(other)))
    assert ok is False
    assert f"expected dtype {dtype}{where(name)}, got {other}" in out


def test_float_causal_mask_gets_the_bool_hint(capsys):
    ok, out = run_check(capsys, "causal_mask", lambda n: torch.tril(torch.ones(n, n)))
    assert ok is False
    assert "expected dtype torch.bool, got torch.float32" in out
    assert "return a bool tensor" in out


FLOAT_NAMES = [name for name in NAMES
               if first_tensor(first_case_output(name)[0]).is_floating_point()]


@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_nan_output_is_a_failure(capsys, name):
    all_nan = altered_reference(name, lambda t: torch.full_like(t, math.nan))
    ok, out = run_check(capsys, name, all_nan)
    assert ok is False
    assert f"got NaN{where(name)} at index (" in out
    assert "Look for 0/0" in out


@pytest.mark.parametrize("name", NAMES)
def test_wrong_type_is_a_failure(capsys, name):
    ok, out = run_check(capsys, name, lambda *args, **kwargs: "hello")
    assert ok is False
    if len(EXERCISES[name].outputs) > 1:
        assert f"expected a tuple ({', '.join(EXERCISES[name].outputs)}), got a str" in out
    else:
        assert "expected a torch.Tensor, got a str" in out


def test_attention_returning_only_the_output_is_a_failure(capsys):
    learner = lambda q, k, v, mask=None: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ok, out = run_check(capsys, "scaled_dot_product_attention", learner)
    assert ok is False
    assert "expected a tuple (out, weights), got a tensor of shape (2, 3, 5)" in out


def test_a_list_instead_of_a_tensor_is_a_failure(capsys):
    ok, out = run_check(capsys, "causal_mask", lambda n: causal_mask(n).tolist())
    assert ok is False
    assert "expected a torch.Tensor, got a list of length 5" in out


def test_none_in_some_cases_only_is_a_missing_return(capsys):
    def learner(q, k, v, mask=None):
        if mask is not None:
            return exercises.scaled_dot_product_attention(q, k, v, mask)

    ok, out = run_check(capsys, "scaled_dot_product_attention", learner)
    assert ok is False
    assert "your function returned None — did you forget `return`? [case: no mask" in out


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("garbage", [
    lambda: 0,  # wrong number of arguments: TypeError
    lambda *a, **k: object(),
    lambda *a, **k: (object(), object()),
    lambda *a, **k: torch.tensor(float("inf")),
    lambda *a, **k: 1 / 0,
    lambda *a, **k: [],
])
def test_check_never_raises(capsys, name, garbage):
    ok, out = run_check(capsys, name, garbage)
    assert ok is False
    assert out.startswith(f"❌ {name}: ") and out.count("\n") == 2
    assert "0x" not in out  # no memory addresses: notebooks compare this output


def test_not_a_function_is_a_failure(capsys):
    ok, out = run_check(capsys, "causal_mask", causal_mask(3))
    assert ok is False
    assert "without parentheses; got a tensor of shape (3, 3)" in out


def test_unknown_names_raise_a_value_error_listing_the_known_ones():
    with pytest.raises(ValueError, match="known exercises: .*causal_mask.*split_heads"):
        check("causal_mask_typo", lambda n: None)
    with pytest.raises(ValueError, match="unknown exercise 'nope'"):
        solution("nope")


# --------------------------------------------------------------------------------------------
# The probes: each bug only shows on some inputs
# --------------------------------------------------------------------------------------------

def outcome_per_case(name, fn):
    """For each case: does ``fn`` agree with the reference (shape and values; raising = no)?"""
    exercise = EXERCISES[name]
    return {case.label: exercises._same(exercises._call(fn, case), case.run(exercise.reference),
                                        exercise)
            for case in exercise.cases()}


def variant(name, pid, label=None):
    return next(p.variant for p in EXERCISES[name].pitfalls
                if p.id == pid and (label is None or p.name == label))


def test_nan_rows_only_show_with_a_fully_masked_row():
    for name in ("scaled_dot_product_attention", "masked_softmax"):
        agrees = outcome_per_case(name, variant(name, "A5", "NaN for a fully masked row"))
        assert agrees.pop("a fully masked row") is False
        assert all(agrees.values())


def test_wrong_head_split_only_shows_when_d_k_differs_from_h():
    agrees = outcome_per_case("split_heads", variant("split_heads", "H1", "view(B, L, d_k, h)"))
    assert agrees["d_model=16, h=4 (d_k = h)"] is True  # the case where the bug hides
    assert agrees["d_model=24, h=4 (d_k=6 != h)"] is False


def test_eps_outside_the_root_needs_a_large_eps():
    n2 = variant("layer_norm", "N2", "eps outside the square root")
    agrees = outcome_per_case("layer_norm", n2)
    assert agrees["random (2, 3, 6)"] is True  # eps=1e-5 is too small to see
    assert agrees["eps=0.1, small inputs"] is False


def test_wrong_slice_of_the_table_shows_as_a_shape_for_length_1(capsys):
    agrees = outcome_per_case("add_positional_encoding", variant("add_positional_encoding", "P4"))
    assert agrees["length 1"] is False
    ok, out = run_check(capsys, "add_positional_encoding", lambda x, pe: pe[:, :x.shape[1]] + x)
    assert ok is False and "[P4]" in out  # a spelling of the bug that differs from the variant


# --------------------------------------------------------------------------------------------
# Learners spell code differently: right answers pass, known bugs are still recognised
# --------------------------------------------------------------------------------------------

def my_masked_softmax(scores, mask):
    weights = torch.where(mask, scores, torch.tensor(float("-inf"))).softmax(dim=-1)
    return torch.nan_to_num(weights, nan=0.0)


def my_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-1, -2) / q.size(-1) ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    weights = F.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask
    return weights @ v, weights


def my_sinusoidal_encoding(max_len, d_model, base=10000.0):
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(base) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def my_pe_rotation(k, d_model, base=10000.0):
    blocks = []
    for i in range(0, d_model, 2):
        theta = torch.tensor(k / base ** (i / d_model))
        blocks.append(torch.stack([torch.stack([theta.cos(), theta.sin()]),
                                   torch.stack([-theta.sin(), theta.cos()])]))
    return torch.block_diag(*blocks)


def my_layer_norm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def my_split_heads(x, num_heads):
    B, L, _ = x.shape
    return x.reshape(B, L, num_heads, -1).permute(0, 2, 1, 3)


def my_merge_heads(x):
    B, h, L, d_k = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(B, L, h * d_k)


@pytest.mark.parametrize("name, fn", [
    ("masked_softmax", my_masked_softmax),
    ("scaled_dot_product_attention", my_attention),
    ("sinusoidal_encoding", my_sinusoidal_encoding),
    ("pe_rotation", my_pe_rotation),
    ("layer_norm", my_layer_norm),
    ("split_heads", my_split_heads),
    ("merge_heads", my_merge_heads),
    ("add_positional_encoding", lambda x, pe: x + pe[: x.size(1), :].unsqueeze(0)),
    ("feed_forward", lambda x, w1, b1, w2, b2: F.linear(F.relu(F.linear(x, w1.T, b1)), w2.T, b2)),
    ("causal_mask", lambda n: ~torch.ones(n, n, dtype=torch.bool).triu(1)),
    ("padding_mask", lambda t, p: (t != p).unsqueeze(1).unsqueeze(2)),
])
def test_other_correct_spellings_pass(capsys, name, fn):
    ok, out = run_check(capsys, name, fn)
    assert ok is True, out


@pytest.mark.parametrize("name, fn, pid", [
    ("masked_softmax", lambda s, m: torch.where(m, s, float("-inf")).softmax(-1), "A5"),
    ("layer_norm",
     lambda x, w, b, eps=1e-5: (x - x.mean(-1, keepdim=True))
     / (x.var(-1, keepdim=True, correction=0).sqrt() + eps) * w + b, "N2"),
    ("split_heads", lambda x, h: x.reshape(x.shape[0], x.shape[1], -1, h).transpose(1, 2), "H1"),
    ("causal_mask", lambda n: torch.triu(torch.ones(n, n)).bool(), "M1"),
    ("padding_mask", lambda t, p: t.eq(p).unsqueeze(1).unsqueeze(1), "M4"),
])
def test_other_spellings_of_a_bug_get_its_hint(capsys, name, fn, pid):
    ok, out = run_check(capsys, name, fn)
    assert ok is False
    assert f"Hint [{pid}]" in out, out


def test_learner_prints_are_silenced_and_inputs_may_be_modified_in_place(capsys):
    def learner(scores, mask):
        print("debugging", scores.shape)
        scores.masked_fill_(~mask, -1e9)  # in place on the checker's copy
        return scores.softmax(-1) * mask

    ok, out = run_check(capsys, "masked_softmax", learner)
    assert ok is True
    assert "debugging" not in out and out.count("\n") == 1


def test_unrecognised_bug_gets_the_first_wrong_value(capsys):
    ok, out = run_check(capsys, "causal_mask", lambda n: torch.ones(n, n, dtype=torch.bool))
    assert ok is False
    assert "wrong value at index (0, 1): expected False, got True [case: size 5]" in out
    assert 'solution("causal_mask") shows one answer' in out


def test_wrong_values_report_position_and_largest_difference(capsys):
    shifted = lambda x, w, b, eps=1e-5: my_layer_norm(x, w, b, eps) + 0.5
    ok, out = run_check(capsys, "layer_norm", shifted)
    assert ok is False
    assert "wrong value at index (0, 0, 0): expected " in out
    assert "(largest difference 0.5)" in out
    assert "input shapes (2, 3, 6), (6,), (6,)" in out


# --------------------------------------------------------------------------------------------
# Output hygiene and solution()
# --------------------------------------------------------------------------------------------

def test_output_is_deterministic_and_global_rng_untouched(capsys):
    state = torch.get_rng_state()
    bug = variant("scaled_dot_product_attention", "A1", "no scaling")
    first = run_check(capsys, "scaled_dot_product_attention", bug)
    second = run_check(capsys, "scaled_dot_product_attention", bug)
    assert first == second
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize("name", NAMES)
def test_solution_prints_the_reference_source(capsys, name):
    solution(name)
    out = capsys.readouterr().out
    reference = EXERCISES[name].reference
    assert out.startswith("# From helpers/")
    assert f"def {reference.__name__}(" in out
    assert "return" in out


def test_solution_says_where_the_code_lives(capsys):
    solution("layer_norm")
    assert capsys.readouterr().out.startswith("# From helpers/layers.py\ndef layer_norm(")
    solution("feed_forward")
    out = capsys.readouterr().out
    assert "# From helpers/exercises.py\ndef feed_forward(" in out
    assert "# From helpers/layers.py (FeedForward.forward)" in out


# --------------------------------------------------------------------------------------------
# The references written in exercises.py agree with helpers/
# --------------------------------------------------------------------------------------------

def test_masked_softmax_matches_the_attention_weights():
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 3)
    mask = torch.rand(2, 4, 5) < 0.5
    mask[0, 1] = False  # a fully masked row
    _, weights = exercises.scaled_dot_product_attention(q, k, v, mask)
    mine = exercises.masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(8), mask)
    assert torch.allclose(mine, weights, atol=1e-6)
    assert torch.all(mine[0, 1] == 0)


def test_pe_rotation_moves_every_position_by_k():
    d_model, k = 16, 3
    pe = sinusoidal_encoding(40, d_model).double()
    M = exercises.pe_rotation(k, d_model).double()
    assert torch.allclose(pe[k:], pe[:-k] @ M.T, atol=1e-5)  # PE[p + k] = M @ PE[p]
    assert torch.allclose(exercises.pe_rotation(-k, d_model), M.T.float(), atol=1e-6)


def test_feed_forward_matches_the_module():
    module = FeedForward(d_model=6, d_ff=10)
    x = torch.randn(2, 3, 6)
    mine = exercises.feed_forward(x, module.linear1.weight.T, module.linear1.bias,
                                  module.linear2.weight.T, module.linear2.bias)
    assert torch.allclose(mine, module(x), atol=1e-6)


def test_add_positional_encoding_matches_the_module():
    x = torch.randn(2, 7, 8)
    expected = PositionalEncoding(d_model=8, max_len=20)(x)
    mine = exercises.add_positional_encoding(x, sinusoidal_encoding(20, 8))
    assert torch.allclose(mine, expected)
