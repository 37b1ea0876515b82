"""Every exercise, one parametrized set: the reference passes, every buggy variant fails WITH its
hint, stubs are "not attempted yet", nothing a learner writes makes ``check`` raise, and
``solution`` prints code that is really in the file it names.

The buggy variants live in the notebooks' modules (``helpers/exercises/nb01.py`` ...); these tests
iterate over all of them, so a new exercise is covered automatically. ``engine.MODULES`` says
which module holds which exercise, without importing them: the tests here check that it agrees
with the modules, and that checking an early notebook's exercise loads nothing a later notebook
teaches.
"""

import ast
import importlib
import json
import math
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import helpers.exercises
from helpers.exercises import all_exercises, engine, solution
from helpers.exercises.pitfalls import PITFALLS

ROOT = Path(__file__).resolve().parents[2]
EXERCISES = all_exercises()
NAMES = list(EXERCISES)
# average_gradients' check starts two processes (helpers/exercises/nb13.py), each importing
# torch: the tests below that run its check are in the slow tier, with tests/distributed
# (`pytest -m slow tests/distributed tests/exercises`, run by .ci/run).
SPAWNS = {"average_gradients"}
# Slow, and on the worker that runs tests/distributed/test_all_reduce_checker.py: the reference's
# gradients, computed by that worker's first check, serve every later one.
SPAWNING = [pytest.mark.slow, pytest.mark.xdist_group("all-reduce check")]


def checked(names):
    """``names`` as parameters, those in ``SPAWNS`` marked ``SPAWNING``."""
    return [pytest.param(name, marks=SPAWNING) if name in SPAWNS else name for name in names]


VARIANTS = [pytest.param(name, pitfall, id=f"{name}-{pitfall.id or '-'}-{pitfall.name}",
                         marks=SPAWNING if name in SPAWNS else [])
            for name in NAMES for pitfall in EXERCISES[name].pitfalls]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: torch's thread pool only adds wake-ups (10x slower on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def first_case_output(name):
    """The reference's output on the first case."""
    exercise = EXERCISES[name]
    return exercise.cases()[0].run(exercise.reference)


def as_learner(name, fn):
    """What a learner hands to ``check``: ``fn`` itself, or for a class exercise (the notebook
    gives ``__init__``, the learner writes ``forward``) a subclass with ``fn`` as ``forward``."""
    reference = EXERCISES[name].reference
    if not isinstance(reference, type):
        return fn
    return type("Learner", (reference,), {EXERCISES[name].cases()[0].method: fn})


def altered_reference(name, change):
    """The reference with ``change`` applied to its (first) output tensor."""
    reference = EXERCISES[name].reference
    method = EXERCISES[name].cases()[0].method if isinstance(reference, type) else None
    call = getattr(reference, method) if method else reference

    def learner(*args, **kwargs):
        out = call(*args, **kwargs)
        if isinstance(out, tuple):
            return (change(out[0]), *out[1:])
        return change(out)

    return as_learner(name, learner)


def first_tensor(output):
    return output[0] if isinstance(output, tuple) else output


def where(name):
    """' for out' for tuple outputs (the checker names the element), '' otherwise."""
    outputs = EXERCISES[name].outputs
    return f" for {outputs[0]}" if len(outputs) > 1 else ""


# --------------------------------------------------------------------------------------------
# One module per notebook, loaded when first needed
# --------------------------------------------------------------------------------------------

def test_the_static_map_agrees_with_the_modules():
    """Every exercise is defined in exactly one module, the one ``MODULES`` names."""
    defined = {}
    for info in pkgutil.iter_modules(helpers.exercises.__path__):
        if re.fullmatch(r"nb\d\d", info.name):
            module = importlib.import_module(f"helpers.exercises.{info.name}")
            for name in module.EXERCISES:
                defined.setdefault(name, []).append(info.name)
    assert len(defined) >= 20
    assert {name: modules for name, modules in defined.items() if len(modules) > 1} == {}
    assert {name: modules[0] for name, modules in defined.items()} == engine.MODULES


# The notebook that teaches each module an exercise module may import (the others, such as
# helpers.checks, serve every notebook); helpers.exercises.nbNN belongs to notebook NN.
TAUGHT_IN = {"helpers.attention": 1, "helpers.positional": 2, "helpers.interop": 3,
             "helpers.layers": 4, "helpers.masks": 6, "helpers.model": 8, "helpers.data": 9,
             "helpers.training": 9, "helpers.translation": 9, "tqdm": 9, "sacrebleu": 9,
             "helpers.decoding": 10, "helpers.ablation": 11, "helpers.tokens": 14,
             "helpers.pretrained": 15}
LOADED_AFTER_EACH_NOTEBOOK = """
import contextlib, io, json, sys
import torch  # which loads tqdm itself (torch.hub), not tqdm.auto
preloaded = set(sys.modules)
from helpers.exercises import check, engine, solution
loaded = []
for number in sorted({int(module[2:]) for module in engine.MODULES.values()}):
    for name, module in engine.MODULES.items():
        if module == f"nb{number:02d}":
            with contextlib.redirect_stdout(io.StringIO()):
                solution(name)
                if name != "average_gradients":  # its check starts processes, loads nothing here
                    check(name, engine.lookup(name).pitfalls[0].variant)  # reference, variants
    loaded.append([number, sorted(m for m in set(sys.modules) - preloaded
                                  if m.split(".")[0] in ("helpers", "tqdm", "sacrebleu"))])
print(json.dumps(loaded))
"""


@pytest.fixture(scope="module")
def loaded_after_each_notebook():
    """[(notebook, the modules loaded once its exercises and every earlier one's are checked)],
    in a fresh interpreter (this one has loaded everything), besides those torch loads."""
    done = subprocess.run([sys.executable, "-c", LOADED_AFTER_EACH_NOTEBOOK], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return [(number, set(modules)) for number, modules in json.loads(done.stdout)]


def notebook_of(module):
    """The notebook that teaches ``module``; 0 for those that serve every notebook."""
    match = re.fullmatch(r"helpers\.exercises\.nb(\d\d)(_\w+)?", module)
    if match:
        return int(match.group(1))
    parts = module.split(".")
    packages = [".".join(parts[:end]) for end in range(len(parts), 0, -1)]  # longest first
    return next((TAUGHT_IN[p] for p in packages if p in TAUGHT_IN), 0)


def test_notebook_01_loads_no_training_code(loaded_after_each_notebook):
    modules = dict(loaded_after_each_notebook)[1]
    assert "helpers.exercises.nb01" in modules
    later = {"helpers.training", "helpers.data", "helpers.decoding", "helpers.model",
             "helpers.translation", "tqdm.auto", "sacrebleu", "helpers.exercises.nb02"}
    assert modules & later == set()


def test_notebook_05_does_not_load_notebook_09s_exercises(loaded_after_each_notebook):
    modules = dict(loaded_after_each_notebook)[5]
    assert {"helpers.exercises.nb04", "helpers.exercises.nb05"} <= modules
    assert "helpers.exercises.nb09" not in modules and "helpers.training" not in modules


def test_no_notebook_loads_a_later_notebooks_exercises(loaded_after_each_notebook):
    numbers = [number for number, _ in loaded_after_each_notebook]
    assert numbers == list(range(16))
    for number, modules in loaded_after_each_notebook:
        modules = {m for m in modules if m.startswith("helpers.exercises.nb")}
        assert {notebook_of(m) for m in modules} == {n for n in numbers if n <= number}, number


@pytest.mark.parametrize("path", sorted((ROOT / "helpers" / "exercises").glob("*.py")),
                         ids=lambda path: path.stem)
def test_imports_are_at_the_top_and_taught_by_then(path):
    """A notebook's module imports, at its top, only what that notebook or an earlier one
    teaches (helpers.training, say, only from nb09 on); the others import no notebook's module."""
    tree = ast.parse(path.read_text())
    body = [node for node in tree.body if not isinstance(node, ast.Expr)]  # the docstring
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert imports == body[:len(imports)], "an import below the top"
    named = [alias.name for node in imports if isinstance(node, ast.Import)
             for alias in node.names]
    named += [{0: "", 1: "helpers.exercises.", 2: "helpers."}[node.level] + (node.module or "")
              for node in imports if isinstance(node, ast.ImportFrom)]
    match = re.fullmatch(r"nb(\d\d)(_\w+)?", path.stem)
    number = int(match.group(1)) if match else 0
    assert [m for m in named if m.startswith("helpers") and notebook_of(m) > number] == []
    assert match or not [m for m in named if ".nb" in m]


# --------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------

# Every pitfall id (helpers/exercises/pitfalls.py) that an exercise can catch, with the exercise
# and a piece of the hint that the learner must see.
ID_HINTS = [
    ("A1", "scaled_dot_product_attention", "square root of the key dimension of one head"),
    ("A1", "cross_attention", "square root of the key dimension of one head"),
    ("A2", "scaled_dot_product_attention", "mask the scores before softmax"),
    ("A2", "masked_softmax", "mask the scores before softmax"),
    ("A3", "scaled_dot_product_attention", "True means may attend"),
    ("A3", "masked_softmax", "True means may attend"),
    ("A3", "cross_attention", "True means may attend"),
    ("A4", "scaled_dot_product_attention", "softmax over the last axis"),
    ("A4", "masked_softmax", "softmax over the last axis"),
    ("A2", "multi_head_attention", "mask the scores before softmax"),
    ("A4", "multi_head_attention", "softmax over the last axis"),
    ("A1", "multi_head_attention", "square root of the key dimension of one head"),
    ("A3", "multi_head_attention", "True means may attend"),
    ("A6", "multi_head_attention", "already divides by sqrt(d_k)"),
    ("H2", "multi_head_attention", "transpose heads back next to d_k before reshaping"),
    ("P1", "pe_rotation", "the exponent is 2i/d_model where 2i is the even column index"),
    ("A5", "scaled_dot_product_attention", "what happens when a whole row is masked?"),
    ("A5", "masked_softmax", "what happens when a whole row is masked?"),
    ("P1", "sinusoidal_encoding", "the exponent is 2i/d_model where 2i is the even column index"),
    ("P2", "sinusoidal_encoding", "even columns sin, odd columns cos"),
    ("P2", "pe_rotation", "even columns sin, odd columns cos"),
    ("P3", "sinusoidal_encoding", "column 0 should be sin(position)"),
    ("P4", "add_positional_encoding", "slice positions, not features"),
    ("P4", "embed_tokens", "slice positions, not features"),
    ("P5", "sinusoidal_encoding", "PE[0] should be 0, 1, 0, 1, ..."),
    ("N1", "layer_norm", "use the biased variance (divide by d, not d-1)"),
    ("N2", "layer_norm", "is your epsilon inside the square root?"),
    ("N3", "layer_norm", "gain and bias have one value per feature"),
    ("N4", "layer_norm", "normalise each token's vector over its d_model features"),
    ("N5", "layer_norm", "only epsilon goes under the root"),
    ("H1", "split_heads", "did you split as view(B, L, h, d_k) and then transpose"),
    ("H1", "multi_head_attention", "did you split as view(B, L, h, d_k) and then transpose"),
    ("H2", "merge_heads", "transpose heads back next to d_k before reshaping"),
    ("H3", "multi_head_attention", "mix them with the output projection w_o"),
    ("M1", "causal_mask", "position t may see positions 0..t"),
    ("M2", "causal_mask", "the diagonal must be allowed"),
    ("M3", "padding_mask", "hide the padded keys: shape (B, 1, 1, L)"),
    ("M4", "padding_mask", "True means a real token you may attend to"),
    ("M5", "decoder_layer", "the decoder's self-attention needs the look-ahead mask"),
    ("L1", "encoder_layer", "post-norm is LayerNorm(x + sublayer(x)), pre-norm is"),
    ("L1", "decoder_layer", "post-norm is LayerNorm(x + sublayer(x)), pre-norm is"),
    ("L2", "encoder_layer", "add the sublayer's input back"),
    ("L2", "decoder_layer", "add the sublayer's input back"),
    ("L3", "encoder_layer", "normalise the sum"),
    ("L4", "decoder_layer", "the queries come from the decoder, keys and values from"),
    ("T1", "shift_right", "shift the target right behind BOS"),
    ("T2", "embed_tokens", "multiply the embeddings by sqrt(d_model)"),
    ("T3", "label_smoothed_nll", "0 * log(0)"),
    ("T3", "label_smoothed_nll", "not even the epsilon share"),
    ("T4", "train_step", "zero the gradients first"),
    ("T5", "train_step", "step the optimizer first, then the scheduler"),
    ("T6", "train_step", "clip before optimizer.step()"),
    ("D1", "beam_step", "work with log-probabilities"),
    ("D1", "beam_step", "log turns products into sums"),
    ("D2", "beam_step", "is a finished translation: it goes to ended"),
    ("D2", "beam_step", "do not throw the candidates that end with eos_id away"),
    ("D10", "beam_step", "rank the candidates of all hypotheses together"),
    ("D5", "greedy_decode", "the next token comes from the last position's logits"),
    ("D6", "greedy_decode", "after EOS a row only gets padding"),
    ("D7", "greedy_decode", "the output starts with BOS"),
    ("D8", "kv_cache_decode", "append the new keys and values to the cache"),
    ("D9", "kv_cache_decode", "the new token may see every stored position"),
    ("D1", "beam_search", "work with log-probabilities"),
    ("T2", "transformer_decode", "multiply the embeddings by sqrt(d_model)"),
    ("M5", "transformer_decode", "the decoder's self-attention needs the look-ahead mask"),
    ("D4", "transformer_decode", "pass src_mask on as the decoder's memory_mask"),
    ("D2", "beam_search", "do not throw finished hypotheses away"),
    ("D10", "beam_search", "rank the candidates of all hypotheses together"),
    ("D11", "beam_search", "compare finished hypotheses with the same length penalty"),
    ("G1", "rms_norm", "does NOT subtract the mean"),
    ("G2", "apply_rope", "pairs ADJACENT features"),
    ("G3", "filter_logits", "divide by the temperature FIRST"),
    ("G4", "filter_logits", "keep the token that crosses top_p"),
    ("G5", "continuation_example", "the loss must count the continuation only"),
    ("T1", "continuation_example", "the label of position t is the NEXT token"),
    ("G6", "gpt", "build the causal mask"),
    ("T2", "gpt", "multiply the embeddings by sqrt(d_model)"),
    ("D5", "generate_tokens", "the next token comes from the last position's logits"),
    ("G7", "generate_tokens", "a cached step sits at position start = cache.length"),
    ("G7", "gpt", "a cached step sits at position start = cache.length"),
    ("G8", "generate_tokens", "the prefill"),
    ("D6", "generate_tokens", "every later token of that row is <eos>"),
    ("S1", "rank_loss", "a mean of means"),
    ("S2", "rank_loss", "W times too small"),
    ("S3", "rank_batch", "train on the same pairs"),
    ("S4", "rank_batch", "a step overlaps the one before"),
    ("S5", "average_gradients", "divide by the world size"),
    ("K1", "pair_counts", "weight each word's pairs by its frequency"),
    ("K8", "pair_counts", "count every occurrence"),
    ("K4", "pair_counts", "count the pairs inside each word only"),
    ("K2", "merge_pair", "('a', 'a', 'a') with ('a', 'a') gives ('aa', 'a')"),
    ("K2", "merge_pair", "('a', 'a', 'a') gives ('aa', 'a')"),
    ("K7", "merge_pair", "compare whole symbols"),
    ("K6", "train_bpe", "break a tie by"),
    ("K6", "train_bpe", "came FIRST in the vocabulary"),
    ("K1", "train_bpe", "weight each word's pairs by its frequency"),
    ("K4", "train_bpe", "count the pairs inside each word only"),
    ("K5", "encode_word", "'</w>'"),
    ("K3", "encode_word", "lowest rank"),
    ("K3", "encode_word", "the rank decides"),
    ("R1", "load_marian", "match the projections by name"),
    ("R2", "load_marian", "its cross_attn <- encoder_attn"),
    ("R3", "load_marian", "interleaved_positions=False"),
    ("R4", "load_marian", "copy final_logits_bias"),
    ("R5", "load_marian", "copy the embedding matrix as it is"),
    ("R6", "load_marian", "a LayerNorm is named after the sub-layer it closes"),
    ("R7", "load_marian", "activation=\"silu\""),
    ("R8", "marian_decoder_inputs", "starts with the pad id"),
    ("R9", "load_marian", "each layer has weights of its own"),
    ("T1", "marian_decoder_inputs", "shift the labels right behind the start token"),
    ("N6", "layer_norm", "divide by the standard deviation, the square"),
    ("N7", "layer_norm", "weight is the gain (it multiplies) and bias"),
    ("N8", "layer_norm", "subtract each token's mean before dividing:"),
    ("N8", "layer_norm", "the variance is the mean square deviation"),
    ("L3", "residual_sublayer", "pre-norm normalises the sub-layer's input,"),
    ("E1", "embed_tokens", "add only the first L rows of the table,"),
    ("E1", "embed_tokens", "L is the length, tokens.shape[1];"),
    ("E1", "embed_tokens", "each position gets its own row: pe[:L] (L ="),
    ("E1", "embed_tokens", "positions count from 0: the first token gets"),
    ("E2", "embed_tokens", "position p gets row p of pe: add pe[:L] (the"),
    ("D4", "encoder_layer", "pass the mask to the attention:"),
    ("A3", "encoder_layer", "in this course True means may attend: pass"),
    ("L5", "encoder_layer", "self-attention comes first, then the"),
    ("L6", "encoder_layer", "each sub-layer has its own LayerNorm: norm1"),
    ("M3", "padding_mask", "a module needs four axes, (B, 1, 1, L): (B,"),
    ("M3", "padding_mask", "the batch stays first: (B, 1, 1, L), i.e."),
    ("M6", "padding_mask", "compare with !=: a real token may have a"),
    ("M6", "padding_mask", "use the pad_id argument, not 0: one case"),
    ("T11", "shift_right", "use the bos_id argument, not the notebook's"),
    ("T12", "shift_right", "put bos_id in front: without it the input"),
    ("T13", "shift_right", "token ids stay integers: build the BOS"),
    ("T14", "shift_right", "shift every token one place right; writing"),
    ("A2", "cross_attention", "mask the scores before softmax"),
    ("L7", "decoder_layer", "the cross-attention's queries are the first"),
    ("D4", "decoder_layer", "pass memory_mask to the cross-attention:"),
    ("L8", "decoder_layer", "tgt_mask (look-ahead) goes to the"),
    ("L5", "decoder_layer", "the order is masked self-attention,"),
    ("L6", "decoder_layer", "each sub-layer has its own LayerNorm: norm1"),
    ("W3", "count_parameters", "every nn.Linear has a bias besides its"),
    ("W3", "count_parameters", "W_Q, W_K, W_V and W_O each have a bias of"),
    ("W3", "count_parameters", "the output projection nn.Linear(d_model,"),
    ("W3", "count_parameters", "each LayerNorm learns a gain and a bias per"),
    ("W3", "count_parameters", "a decoder layer has two attention blocks,"),
    ("W3", "count_parameters", "an attention block has four d_model x"),
    ("W3", "count_parameters", "the sinusoidal positional encoding is a"),
    ("W3", "count_parameters", "the heads share d_model out (d_k = d_model /"),
    ("W3", "count_parameters", "the feed-forward network has two linear"),
    ("W3", "count_parameters", "the model ends with the output projection"),
    ("W3", "count_parameters", "this model keeps three separate matrices"),
    ("W3", "count_parameters", "count both embeddings: the source one"),
    ("W3", "count_parameters", "the output projection scores target tokens:"),
    ("W3", "count_parameters", "the model has two stacks of num_layers"),
    ("W3", "count_parameters", "multiply each layer's count by num_layers:"),
    ("W1", "output_projection", "return the logits themselves (any real"),
    ("T2", "transformer_decode", "the factor is sqrt(d_model), not d_model:"),
    ("A3", "transformer_decode", "in this course True means may attend:"),
    ("W2", "transformer_decode", "use a given tgt_mask as it is (it may hide"),
    ("W2", "transformer_decode", "when tgt_mask is None, the decoder gets the"),
    ("W1", "transformer_decode", "project the decoder's output to the"),
    ("W1", "transformer_decode", "return the logits themselves (any real"),
    ("T7", "label_smoothed_nll", "use log_softmax, never log(softmax(...)): a"),
    ("T8", "label_smoothed_nll", "mask the labels before gather (or indexing):"),
    ("T9", "train_step", "call scheduler.step() after"),
    ("T9", "train_step", "call scheduler.step() once per step"),
    ("T10", "train_step", "call optimizer.step() after clipping: it is"),
    ("T10", "train_step", "call optimizer.zero_grad() before"),
    ("T6", "train_step", "clip after loss.backward(), which computes"),
    ("T6", "train_step", "clip the gradients' global norm to clip_norm"),
    ("T6", "train_step", "clip the global norm of all gradients"),
    ("D6", "greedy_decode", "after EOS a row gets eos_id again (as"),
    ("D4", "greedy_decode", "pass src_mask to model.encode and to every"),
    ("D9", "kv_cache_decode", "the new tokens are the LAST T of the t + T"),
    ("D9", "kv_cache_decode", "the new tokens' queries meet the keys of all"),
    ("D12", "kv_cache_decode", "give the mask four axes, (1, 1, T, t + T):"),
    ("D8", "kv_cache_decode", "store the keys and values in"),
    ("D13", "kv_cache_decode", "project the memory's keys and values once,"),
    ("D4", "kv_cache_decode", "pass memory_mask to the cross-attention:"),
    ("D3", "beam_search", "do not stop when a hypothesis ends"),
    ("I3", "source_alignment", "each row of a cross-attention map is one"),
    ("I1", "attention_entropy", "0 * log(0) is NaN in floating point: a"),
    ("I2", "attention_entropy", "each query has its own distribution over the"),
    ("I4", "zero_head", "merge_heads (notebook 03) puts the heads"),
    ("G9", "generate_tokens", "your tokens are right, but the prompt went"),
    ("G10", "generate_tokens", "your tokens are right, but every step ran"),
    ("G3", "min_p_filter", "divide by the temperature FIRST"),
    ("R7", "load_marian", "Marian's feed-forward networks use swish, x"),
]


def test_every_pitfall_id_is_listed_with_its_hint():
    """Each (id, exercise) pair of the registry is in the table, and each of its variants'
    hints contains one of the table's pieces for that pair."""
    listed = {}
    for pid, name, piece in ID_HINTS:
        listed.setdefault((pid, name), []).append(piece)
    registered = {(p.id, name): [] for name in NAMES for p in EXERCISES[name].pitfalls if p.id}
    assert set(listed) == set(registered)
    for name in NAMES:
        for pitfall in EXERCISES[name].pitfalls:
            if pitfall.id:
                pieces = listed[pitfall.id, name]
                assert any(piece in pitfall.hint for piece in pieces), (name, pitfall.name)
    ids = {pid for pid, _ in listed}
    every = set(PITFALLS)  # the registry (tests/exercises/test_pitfalls.py: numbered without gaps)
    assert every == ids


@pytest.mark.parametrize("name", NAMES)
def test_every_exercise_has_cases_and_pitfalls(name):
    assert len(EXERCISES[name].cases()) >= 3
    assert EXERCISES[name].pitfalls
    assert len({p.name for p in EXERCISES[name].pitfalls}) == len(EXERCISES[name].pitfalls)


# --------------------------------------------------------------------------------------------
# Right, wrong, and untouched answers
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", checked(NAMES))
def test_the_cases_are_the_same_on_every_call(name):
    """``check`` computes the reference's outcomes on the first call and keeps them
    (``engine._reference_outcomes``): right only while every call of ``cases()`` builds the same
    inputs, whatever the global random state."""
    exercise = EXERCISES[name]
    first = [engine._call(exercise.reference, case) for case in exercise.cases()]
    torch.manual_seed(1234)
    torch.rand(7)
    again = [engine._call(exercise.reference, case) for case in exercise.cases()]
    assert not any(isinstance(outcome, engine.Raised) for outcome in first)
    assert all(engine._same(a, b, exercise) for a, b in zip(first, again, strict=True))


@pytest.mark.parametrize("name", checked(NAMES))
def test_a_right_answer_gets_one_line_with_the_number_of_cases(run_check, name):
    """What a learner sees for a right answer (the reference, run again: the check compares it
    with its own kept outcomes). The reference itself is not tested here: tests/core compares
    each one with PyTorch's own modules, and test_the_cases_are_the_same_on_every_call that its
    cases repeat."""
    ok, out = run_check(name, EXERCISES[name].reference)
    assert ok is True
    assert out.startswith(f"✅ {name}: correct on all {len(EXERCISES[name].cases())} test cases")
    assert out.count("\n") == 1  # one message, one line


@pytest.mark.parametrize("name, pitfall", VARIANTS)
def test_buggy_variant_fails_with_its_hint(run_check, name, pitfall):
    ok, out = run_check(name, pitfall.variant)
    assert ok is False
    assert out.startswith(f"❌ {name}: ")
    assert (f"Hint [{pitfall.id}]: " if pitfall.id else "Hint: ") in out
    assert pitfall.hint in out  # its own hint, not another variant's
    assert out.count("\n") == 2  # the problem, then the hint


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


@pytest.mark.parametrize("name", checked(NAMES))
@pytest.mark.parametrize("stub", [stub_return_none, stub_not_implemented, stub_pass,
                                  stub_none_tuple, lambda *args, **kwargs: None])
def test_untouched_stub_is_not_attempted_yet(run_check, name, stub):
    ok, out = run_check(name, as_learner(name, stub))
    assert ok is False
    assert out.startswith(f"⏳ {name}: not attempted yet")
    assert "❌" not in out and "✅" not in out


# average_gradients: an error raised in its two processes comes back by name, tested once in
# tests/distributed/test_all_reduce_checker.py (each such check starts two processes).
@pytest.mark.parametrize("name", [name for name in NAMES if name not in SPAWNS])
def test_another_exception_is_a_failure_naming_it(run_check, name):
    def learner(*args, **kwargs):
        raise ValueError("boom: shapes do not line up")

    ok, out = run_check(name, as_learner(name, learner))
    assert ok is False
    assert out.startswith(f"❌ {name}: your function raised ValueError: boom: shapes do not")
    assert "[case: " in out


# Exercises whose compared output is assembled by the case from what the learner's function did
# (train_step returns one loss per call, the case collects losses, weights and learning rate;
# kv_cache_decode returns one layer's output, the case decodes with it and collects the logits;
# beam_step and beam_search return lists of candidates or (tokens, score) that the case turns
# into tensors; load_marian returns a model, whose logits the case computes; average_gradients
# returns nothing, the case collects the gradients it left in two processes):
# altering the function's return value cannot change the shape or dtype of that output.
# tests/exercises/test_train_step_checker.py, test_decoding_checkers.py,
# tests/distributed/test_all_reduce_checker.py and tests/pretrained/test_load_marian_checker.py cover them.
ASSEMBLED = ("train_step", "kv_cache_decode", "beam_step", "beam_search", "average_gradients",
             "load_marian", "generate_tokens")  # generate_tokens: the tokens and the calls
# Notebook 14's answers are Python values (dicts, tuples, lists of merges), compared by the
# exercise's own ``compare``: tests/exercises/test_tokens_checkers.py covers them.
VALUES = [name for name in NAMES if EXERCISES[name].compare is not None]
RETURNED = [name for name in NAMES if name not in ASSEMBLED and name not in VALUES]


@pytest.mark.parametrize("name", RETURNED)
def test_wrong_shape_names_expected_and_given(run_check, name):
    expected_shape = tuple(first_tensor(first_case_output(name)).shape)
    ok, out = run_check(name, altered_reference(name, lambda t: t.unsqueeze(0)))
    assert ok is False
    assert f"expected shape {expected_shape}{where(name)}, got {(1, *expected_shape)}" in out
    assert "Print the shape after each step" in out


@pytest.mark.parametrize("name", RETURNED)
def test_wrong_dtype_names_expected_and_given(run_check, name):
    dtype = first_tensor(first_case_output(name)).dtype
    other = torch.int64 if dtype == torch.bool else torch.float64
    ok, out = run_check(name, altered_reference(name, lambda t: t.to(other)))
    assert ok is False
    assert f"expected dtype {dtype}{where(name)}, got {other}" in out


FLOAT_NAMES = [name for name in RETURNED
               if first_tensor(first_case_output(name)).is_floating_point()]


@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_nan_output_is_a_failure(run_check, name):
    all_nan = altered_reference(name, lambda t: torch.full_like(t, math.nan))
    ok, out = run_check(name, all_nan)
    assert ok is False
    assert f"got NaN{where(name)} at index (" in out
    assert "Look for 0/0" in out


@pytest.mark.parametrize("name", [name for name in NAMES if name != "average_gradients"])
def test_wrong_type_is_a_failure(run_check, name):
    ok, out = run_check(name, as_learner(name, lambda *args, **kwargs: "hello"))
    assert ok is False
    if name in VALUES:
        assert "got a str" in out
    elif len(EXERCISES[name].outputs) > 1:
        assert f"expected a tuple ({', '.join(EXERCISES[name].outputs)}), got a str" in out
    else:
        assert "expected a torch.Tensor, got a str" in out


@pytest.mark.parametrize("name", checked(NAMES))
@pytest.mark.parametrize("garbage", [
    lambda: 0,  # wrong number of arguments: TypeError
    lambda *a, **k: object(),
    lambda *a, **k: (object(), object()),
    lambda *a, **k: torch.tensor(float("inf")),
    lambda *a, **k: 1 / 0,
    lambda *a, **k: [],
])
def test_check_never_raises(run_check, name, garbage):
    ok, out = run_check(name, as_learner(name, garbage))
    assert ok is False
    assert out.startswith(f"❌ {name}: ") and out.count("\n") == 2
    assert "0x" not in out  # no memory addresses: notebooks compare this output


# --------------------------------------------------------------------------------------------
# solution()
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_solution_prints_code_from_the_file_it_names(capsys, name):
    """Each block is headed by a file of the project, holds every line (the def line aside,
    which may show the exercise's name) of a function in it, and returns something."""
    solution(name)
    blocks = capsys.readouterr().out.rstrip("\n").split("\n\n# From ")
    assert blocks[0].startswith("# From helpers/")
    assert len(blocks) == len(EXERCISES[name].sources)
    for block in blocks:
        header, *code = block.removeprefix("# From ").split("\n")
        text = (ROOT / header.split(" (")[0]).read_text()
        assert code[0].startswith(("def ", "@"))  # "@": a decorator
        assert "return" in block or name == "average_gradients"  # which works in place
        missing = [line for line in code[1:]
                   if not re.search(rf"^ *{re.escape(line.lstrip())}$", text, re.M)]
        assert missing == [], header
