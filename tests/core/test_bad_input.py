"""Bad input gets a clear error, never a silent wrong answer (the rule of README's "Contributing").

Each test feeds the public API something a careless learner would, and checks that the answer is
one of: a ``ValueError``/``TypeError`` whose message names what was expected and what was given;
a documented normalisation; or a warning that names the problem. The last section is a property
test: random wrong mask shapes, for every public function and class that takes a mask.
"""

import contextlib
import io
import math
import re
import threading
import time
import warnings

import numpy as np
import pytest
import torch

from helpers.attention import (
    MultiHeadAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from helpers.data import Vocab
from helpers.decoding import beam_search, greedy_decode
from helpers.exercises import TIME_LIMIT, all_exercises, check, engine
from helpers.exercises.nb01 import masked_softmax
from helpers.exercises.nb07 import cross_attention
from helpers.interop import to_torch, torch_attn_mask, torch_key_padding_mask
from helpers.layers import Decoder, DecoderLayer, Encoder, EncoderLayer
from helpers.masks import causal_mask, padding_mask
from helpers.model import Transformer
from helpers.positional import PositionalEncoding
from helpers.training import TransformerConfig, build_model, load_checkpoint, save_checkpoint, train
from helpers.translation import make_corpus, translate
from helpers.translation.lexicon import LONGEST_SENTENCE

BOS, EOS = 1, 2
D_MODEL, HEADS = 8, 2


def clear_error(call, *shown, kind=(ValueError, TypeError)):
    """``call()`` must raise ``kind`` with every string of ``shown`` in its message."""
    with pytest.raises(kind) as error:
        call()
    message = str(error.value)
    for text in shown:
        assert text in message, f"{text!r} not in {message!r}"
    return message


# ---------------------------------------------------------------------------------------------
# Silent wrong results
# ---------------------------------------------------------------------------------------------

def test_padding_mask_without_its_axes_is_refused_when_batch_equals_length():
    """The trap: a (B, S) padding mask with B == S would read as an (Lq, Lk) mask."""
    torch.manual_seed(0)
    x = torch.randn(3, 3, D_MODEL)
    pad = torch.tensor([[True, True, True], [True, True, False], [True, False, False]])  # (B, S)
    mha, encoder = MultiHeadAttention(D_MODEL, HEADS), Encoder(1, D_MODEL, HEADS, 16)
    for call, name in [(lambda: mha(x, x, x, pad), "MultiHeadAttention"),
                       (lambda: encoder(x, pad), "Encoder")]:
        message = clear_error(call, name, "(3, 3)", "has 2 axes", "(B, 1, 1, Lk)")
        assert "padding mask" in message and "causal_mask(Lq)[None, None]" in message
    # given the right way, it works, and differs from the (Lq, Lk) reading
    right = mha(x, x, x, pad[:, None, None, :])
    wrong = mha(x, x, x, pad[None, None])  # what a 2-D mask would have been taken for
    assert (right - wrong).abs().max() > 1e-2


@pytest.mark.parametrize("ids, low, high", [([[1, 42]], 1, 42), ([[-1, 3]], -1, 3)])
def test_token_ids_outside_the_vocabulary_get_a_clear_error(ids, low, high, tiny_model):
    model = tiny_model()
    vocab = model.src_embed.num_embeddings
    clear_error(lambda: model.encode(torch.tensor(ids)),
                f"src holds token ids from {low} to {high}", f"ids 0..{vocab - 1}")


def test_token_ids_are_not_read_when_the_lookup_succeeds(monkeypatch, tiny_model):
    """The README's claim: the checks compare shapes and dtypes and read no tensor. Reading
    the ids (min/max) would be a full pass, and a GPU synchronisation, on every call."""
    model = tiny_model()
    src = torch.randint(3, 12, (2, 5))
    expected = model.encode(src)
    reads = []
    for method in ("min", "max"):
        real = getattr(torch.Tensor, method)
        monkeypatch.setattr(torch.Tensor, method, lambda self, *a, _real=real, **k: (
            reads.append(tuple(self.shape)), _real(self, *a, **k))[1])
    assert torch.equal(model.encode(src), expected)
    assert reads == []
    with pytest.raises(ValueError):
        model.encode(torch.tensor([[1, 99]]))
    assert reads  # ...and read once a lookup failed, to name the range


# ---------------------------------------------------------------------------------------------
# The mask rule does not depend on the data: every size from 1 to 6, B == Lq == Lk included
# ---------------------------------------------------------------------------------------------

SIZES = range(1, 7)
# The forms the README and notebook 06 document, built with the course's own mask functions,
# and the forms a learner might misread; each is (name, build(B, Lq, Lk, h)).
DOCUMENTED = [
    ("padding (B, 1, 1, Lk)", lambda B, Lq, Lk, h: padding_mask(_tokens(B, Lk), 0)),
    ("look-ahead (1, 1, Lq, Lk)", lambda B, Lq, Lk, h: causal_mask(Lk)[None, None, Lk - Lq:]),
    ("combined (B, 1, Lq, Lk)",
     lambda B, Lq, Lk, h: causal_mask(Lk)[Lk - Lq:] & padding_mask(_tokens(B, Lk), 0)),
    ("per head (B, h, Lq, Lk)", lambda B, Lq, Lk, h: torch.ones(B, h, Lq, Lk, dtype=torch.bool)),
    ("shared keys (1, 1, 1, Lk)", lambda B, Lq, Lk, h: torch.ones(1, 1, 1, Lk, dtype=torch.bool)),
]
MISREAD = [
    ("look-ahead without its axes (Lq, Lk)", lambda B, Lq, Lk, h: causal_mask(Lk)[Lk - Lq:]),
    ("padding without its axes (B, Lk)", lambda B, Lq, Lk, h: padding_mask(_tokens(B, Lk), 0)[:, 0, 0]),
    ("padding with 3 axes (B, 1, Lk)", lambda B, Lq, Lk, h: padding_mask(_tokens(B, Lk), 0)[:, 0]),
    ("combined without the head axis (B, Lq, Lk)",
     lambda B, Lq, Lk, h: (causal_mask(Lk)[Lk - Lq:] & padding_mask(_tokens(B, Lk), 0))[:, 0]),
    ("keys only (Lk,)", lambda B, Lq, Lk, h: torch.ones(Lk, dtype=torch.bool)),
    ("5 axes (1, B, 1, 1, Lk)", lambda B, Lq, Lk, h: padding_mask(_tokens(B, Lk), 0)[None]),
]


def _tokens(B, L):
    """Token ids (B, L) whose sentence i has its last min(i, L - 1) positions padded (id 0)."""
    tokens = torch.ones(B, L, dtype=torch.long)
    for i in range(B):
        tokens[i, L - min(i, L - 1):] = 0
    return tokens


@pytest.mark.parametrize("form", DOCUMENTED + MISREAD, ids=lambda form: form[0])
def test_a_mask_form_works_or_fails_for_every_size(form):
    """Cross-attention (Lq queries over Lk keys) through MultiHeadAttention, the attention
    function on (B, h, Lq, d_k) inputs and a decoder layer: a documented form works for every
    B, Lq, Lk in 1..6; a misread form fails for every one, with a message naming the shape."""
    name, build = form
    mha, layer = MultiHeadAttention(D_MODEL, HEADS), DecoderLayer(D_MODEL, HEADS, 16)
    documented = form in DOCUMENTED
    for B in SIZES:
        for Lq in SIZES:
            for Lk in range(Lq, 7):  # a look-ahead mask needs Lk >= Lq (a KV cache's rows)
                mask = build(B, Lq, Lk, HEADS)
                xq, xk = torch.randn(B, Lq, D_MODEL), torch.randn(B, Lk, D_MODEL)
                q, k = torch.randn(B, HEADS, Lq, 4), torch.randn(B, HEADS, Lk, 4)
                calls = [("MultiHeadAttention", lambda: mha(xq, xk, xk, mask)),
                         ("attention", lambda: scaled_dot_product_attention(q, k, k, mask)),
                         ("DecoderLayer", lambda: layer(xq, xk, None, mask))]
                for where, call in calls:
                    if documented:
                        assert torch.isfinite(call()[0] if where == "attention" else call()).all()
                        continue
                    with pytest.raises(ValueError) as error:
                        call()
                    assert str(tuple(mask.shape)) in str(error.value), (name, B, Lq, Lk, where)


def test_translate_normalises_case_and_final_punctuation(shipped):
    plain = translate(shipped.model, ["the cat eats a cake", "I like the red car"],
                      shipped.src_vocab, shipped.tgt_vocab)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn about once normalised
        messy = translate(shipped.model, ["The cat eats a cake.", "  i LIKE the Red car ! "],
                          shipped.src_vocab, shipped.tgt_vocab)
    assert messy == plain
    assert shipped.src_vocab.normalize("The cat eats a cake.") == "the cat eats a cake"
    assert shipped.src_vocab.normalize("i like it?!") == "I like it"


def test_translate_names_unknown_words(shipped):
    sentences = ["the dog watches the purple cat", "the cat likes the dog"]
    with pytest.warns(UserWarning, match=r"<unk>.*sentence 0 .*'purple'") as record:
        translate(shipped.model, sentences, shipped.src_vocab, shipped.tgt_vocab)
    assert "sentence 1" not in str(record[0].message)
    clear_error(lambda: translate(shipped.model, sentences, shipped.src_vocab, shipped.tgt_vocab,
                                  strict=True), "'purple'", kind=ValueError)


def test_translate_warns_about_long_inputs_and_cut_outputs(shipped):
    long = " ".join(["the big red dog likes the small cat"] * 3)  # 24 words
    long_words = f"at most {LONGEST_SENTENCE} words.*sentence 0 has 24 words"
    with pytest.warns(UserWarning, match=long_words):
        translate(shipped.model, [long], shipped.src_vocab, shipped.tgt_vocab)
    with pytest.warns(UserWarning, match=r"without <eos>.*sentence 0 \(max_len=2\)"):
        out = translate(shipped.model, ["I like the big red car"], shipped.src_vocab,
                        shipped.tgt_vocab, max_len=2)
    assert len(out[0].split()) == 2
    clear_error(lambda: translate(shipped.model, [long], shipped.src_vocab, shipped.tgt_vocab,
                                  strict=True), "24 words", kind=ValueError)


@pytest.mark.parametrize("max_len, kind", [(0, ValueError), (-3, ValueError), (2.5, TypeError)])
def test_translate_rejects_bad_max_len(shipped, max_len, kind):
    clear_error(lambda: translate(shipped.model, ["I like the car"], shipped.src_vocab,
                                  shipped.tgt_vocab, max_len=max_len), "max_len", repr(max_len),
                kind=kind)


def test_longest_sentence_is_the_longest_the_corpus_writes():
    corpus = make_corpus(seed=1, num_train=3000, num_valid=10, num_test=10)
    assert max(len(en.split()) for en, _ in corpus.train) == LONGEST_SENTENCE


@pytest.mark.parametrize("start", [-5, -1, 1.5])
def test_positional_encoding_rejects_negative_or_fractional_start(start):
    pe = PositionalEncoding(D_MODEL, 20)
    clear_error(lambda: pe(torch.zeros(1, 2, D_MODEL), start=start), "start", repr(start))


@pytest.mark.parametrize("build, shown", [
    (lambda: MultiHeadAttention(0, 1), "d_model must be at least 1, got 0"),
    (lambda: MultiHeadAttention(8, 0), "num_heads must be at least 1, got 0"),
    (lambda: MultiHeadAttention(8.0, 2), "d_model must be a whole number (int), got 8.0"),
    (lambda: Transformer(0, 10), "src_vocab_size must be at least 1, got 0"),
    (lambda: Transformer(10, 0), "tgt_vocab_size must be at least 1, got 0"),
    (lambda: Transformer(10, 10, d_ff=0), "d_ff must be at least 1, got 0"),
    (lambda: Transformer(10, 10, num_layers=2.0), "num_layers must be a whole number"),
    (lambda: Transformer(10, 10, activation="swish"),
     "FeedForward: activation is 'relu' or 'silu', got 'swish'"),
])
def test_sizes_that_make_no_sense_are_refused(build, shown):
    clear_error(build, shown)


def test_empty_sequences_and_zero_width_heads_are_refused(tiny_model):
    model = tiny_model()
    memory = model.encode(torch.randint(3, 12, (1, 4)))
    clear_error(lambda: model.encode(torch.zeros(1, 0, dtype=torch.long)), "src", "(1, 0)")
    clear_error(lambda: model.decode(torch.zeros(1, 0, dtype=torch.long), memory), "tgt", "(1, 0)")
    clear_error(lambda: greedy_decode(model, torch.zeros(2, 0, dtype=torch.long), 5, BOS, EOS),
                "src", "(2, 0)")
    q = torch.randn(2, 3, 0)  # d_k = 0: scores / sqrt(0) would be NaN
    clear_error(lambda: scaled_dot_product_attention(q, q, torch.randn(2, 3, 4)), "d_k",
                "(2, 3, 0)")
    clear_error(lambda: scaled_dot_product_attention(torch.randn(1, 2, 4), torch.randn(1, 0, 4),
                                                     torch.randn(1, 0, 4)), "Lk", "(1, 0, 4)")


def test_train_stops_at_the_first_non_finite_loss(tiny_model):
    """NaN is not looked for in every forward pass (a scan of every tensor, a GPU stall); the
    loss, read anyway, is checked, before the update would spread NaN into the weights."""
    model = tiny_model()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def nan_loss(m, batch):
        return m.generator.weight.sum() * float("nan")

    clear_error(lambda: train(model, [None] * 3, nan_loss, optimizer, progress=False),
                "train, step 1: the loss is nan", kind=ValueError)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_to_torch_keeps_float64():
    torch.manual_seed(0)
    ours = MultiHeadAttention(D_MODEL, HEADS).double().eval()
    theirs = to_torch(ours)
    assert next(theirs.parameters()).dtype == torch.float64
    x = torch.randn(2, 3, D_MODEL, dtype=torch.float64)
    assert torch.allclose(ours(x, x, x), theirs(x, x, x)[0], atol=1e-12)


def test_torch_attn_mask_refuses_integer_masks():
    clear_error(lambda: torch_attn_mask(torch.ones(2, 1, 3, 3, dtype=torch.long), 2, HEADS),
                "bool", "torch.int64", "mask.bool()", kind=TypeError)


# ---------------------------------------------------------------------------------------------
# check(): None, NotImplementedError on some cases, SystemExit, and the time limit
# ---------------------------------------------------------------------------------------------

def test_check_asks_for_a_forgotten_return(run_check):
    def my_causal_mask(size):
        mask = torch.ones(size, size, dtype=torch.bool).tril()  # noqa: F841 (the bug)

    ok, out = run_check("causal_mask", my_causal_mask)
    assert not ok
    assert out.startswith("❌ causal_mask: your function returned None — did you forget `return`?")
    assert "not attempted" not in out


def test_check_reports_not_implemented_on_some_cases_only(run_check):
    def my_causal_mask(size):
        if size > 2:
            raise NotImplementedError("big masks: later")
        return torch.ones(size, size, dtype=torch.bool).tril()

    ok, out = run_check("causal_mask", my_causal_mask)
    assert not ok
    assert "your function raised NotImplementedError: big masks: later [case: size 5]" in out
    assert "still raises NotImplementedError (other cases return a value)" in out
    assert "not attempted" not in out


@pytest.mark.parametrize("time_limit", [None, math.inf])  # in a thread, and in this one
def test_check_reports_system_exit(run_check, time_limit):
    def my_causal_mask(size):
        raise SystemExit(3)

    ok, out = run_check("causal_mask", my_causal_mask, time_limit=time_limit)
    assert not ok
    assert "your function raised SystemExit: 3" in out and "exit()" in out


def test_check_gives_up_on_a_function_that_never_returns(run_check, capsys):
    stop, finished = threading.Event(), threading.Event()

    def my_causal_mask(size):
        n = 0
        while not stop.is_set():  # never returns by itself
            n += 1
        finished.set()
        print("finished")  # after the report: must not end up in check's output

    try:
        ok, out = run_check("causal_mask", my_causal_mask, time_limit=0.3)
        # the limit fired: check returned while the function was still running (measured by
        # what happened, not by the clock of a loaded machine)
        still_running = not finished.is_set()
    finally:
        stop.set()  # end the background thread
    assert not ok and still_running
    assert out.startswith(
        "❌ causal_mask: your function did not return within 0.3 s [case: size 5]")
    assert "restart" in out and "time_limit=60" in out
    print("stdout still works")
    assert "stdout still works" in capsys.readouterr().out


def test_default_time_limit_leaves_a_wide_margin():
    """The whole check of every reference answer takes far less than one call may. (Its cases
    are built first: notebook 15's import transformers once, seconds that no limit covers.)

    Measured in CPU seconds of this process (``time.process_time``), which other processes on a
    loaded machine do not inflate, as they do wall-clock time; a check that has gone wrong
    (many more calls, a slow path) costs more CPU as well."""
    assert 3.0 <= TIME_LIMIT <= 30.0
    for name, exercise in all_exercises().items():
        if exercise.time_limit is not None:  # its own limit (average_gradients: 2 processes,
            continue                         # tested in tests/distributed, the slow tier)
        exercise.cases()
        engine._REFERENCE_OUTCOMES.clear()  # the first check, which runs the reference too
        start = time.process_time()
        with io.StringIO() as sink, contextlib.redirect_stdout(sink):
            assert check(name, exercise.reference)
        assert time.process_time() - start < TIME_LIMIT / 5, name


@pytest.mark.parametrize("bad", [0, -1, "10", True])
def test_check_refuses_a_bad_time_limit(bad):
    clear_error(lambda: check("causal_mask", causal_mask, time_limit=bad), "time_limit",
                repr(bad), kind=ValueError)


# ---------------------------------------------------------------------------------------------
# Deep errors: the message says what the user did wrong
# ---------------------------------------------------------------------------------------------

def test_attention_batch_mismatch():
    clear_error(lambda: scaled_dot_product_attention(torch.randn(2, 3, 4), torch.randn(3, 3, 4),
                                                     torch.randn(3, 3, 4)),
                "batch axes", "(2, 3, 4)", "(3, 3, 4)")
    mha = MultiHeadAttention(D_MODEL, HEADS)
    clear_error(lambda: mha(torch.randn(2, 3, D_MODEL), torch.randn(3, 3, D_MODEL),
                            torch.randn(3, 3, D_MODEL)), "key", "B=2", "(3, 3, 8)")


@pytest.mark.parametrize("dtypes", [(torch.long,) * 3, (torch.bool,) * 3,
                                    (torch.float32, torch.float64, torch.float32)])
def test_attention_dtypes(dtypes):
    q, k, v = (torch.ones(2, 3, 4, dtype=d) for d in dtypes)
    clear_error(lambda: scaled_dot_product_attention(q, k, v), "floating-point",
                *map(str, dtypes), kind=TypeError)


@pytest.mark.parametrize("dtype", [torch.long, torch.float64])
def test_multi_head_attention_dtype(dtype):
    x = torch.ones(2, 3, D_MODEL, dtype=dtype)
    clear_error(lambda: MultiHeadAttention(D_MODEL, HEADS)(x, x, x), "query", "torch.float32",
                str(dtype), kind=TypeError)


def test_numpy_inputs():
    x = np.zeros((2, 3, D_MODEL), dtype=np.float32)
    clear_error(lambda: MultiHeadAttention(D_MODEL, HEADS)(x, x, x), "torch.Tensor",
                "numpy.ndarray", "torch.from_numpy", kind=TypeError)
    clear_error(lambda: scaled_dot_product_attention(x, x, x), "torch.Tensor", "numpy.ndarray",
                kind=TypeError)


@pytest.mark.parametrize("call, shown", [
    (lambda: split_heads(torch.randn(3, 8), 2), ["(B, L, d_model)", "(3, 8)"]),
    (lambda: split_heads(torch.randn(1, 3, 8), 0), ["num_heads must be at least 1, got 0"]),
    (lambda: split_heads(torch.randn(1, 3, 8), 3), ["d_model=8", "num_heads=3"]),
    (lambda: split_heads(torch.randn(1, 3, 8), 2.0), ["num_heads", "2.0"]),
    (lambda: merge_heads(torch.randn(3, 8)), ["(B, h, L, d_k)", "(3, 8)"]),
])
def test_split_and_merge_heads(call, shown):
    clear_error(call, *shown)


@pytest.mark.parametrize("kwargs, shown", [
    (dict(max_len=5.0), ["max_len", "5.0"]),
    (dict(max_len=5, beam_size=2.0), ["beam_size", "2.0"]),
    (dict(max_len=0), ["max_len must be at least 1, got 0"]),
])
def test_decoders_refuse_fractional_sizes(kwargs, shown, tiny_model):
    model, src = tiny_model(), torch.randint(3, 12, (1, 4))
    if "beam_size" in kwargs:
        call = lambda: beam_search(model, src, kwargs["beam_size"], kwargs["max_len"], BOS, EOS)
    else:
        call = lambda: greedy_decode(model, src, kwargs["max_len"], BOS, EOS)
    clear_error(call, *shown)


def forward_calls(model) -> list:
    """A list that grows by one name each time a submodule of ``model`` runs its forward."""
    calls = []
    for name, module in model.named_modules():
        module.register_forward_pre_hook(lambda m, args, name=name: calls.append(name))
    return calls


def test_greedy_decode_checks_max_len_against_the_table_before_decoding(tiny_model):
    model, src = tiny_model(max_len=50), torch.randint(3, 12, (1, 4))
    calls = forward_calls(model)
    for call in (lambda: greedy_decode(model, src, 51, BOS, EOS),
                 lambda: beam_search(model, src, 2, 51, BOS, EOS)):
        clear_error(call, "max_len=51", "max_len=50", kind=ValueError)
    assert calls == []  # at once: not one forward pass, let alone 50 decoding steps
    assert greedy_decode(model, src, 50, BOS, EOS).shape[1] <= 51  # the limit itself is fine
    assert calls  # the hooks do see decoding


# ---------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def checkpoint_bytes(tmp_path_factory):
    config = TransformerConfig(d_model=8, num_heads=2, num_layers=1, d_ff=16, dropout=0.0)
    vocab = Vocab.build(["the cat", "le chat"])
    model = build_model(config, len(vocab), len(vocab))
    path = tmp_path_factory.mktemp("ckpt") / "good.pt"
    save_checkpoint(path, model, config, vocab, vocab)
    return path.read_bytes(), model.state_dict(), config


@pytest.mark.parametrize("content, why", [
    (lambda good, sd: b"", "the file is empty"),
    (lambda good, sd: good[: len(good) // 2], "truncated or damaged"),
    (lambda good, sd: bytes(range(256)) * 40, "truncated or damaged"),
    (lambda good, sd: sd, "a plain state_dict"),
    (lambda good, sd: {"config": {}}, "lacks the keys format, src_vocab"),
    (lambda good, sd: [1, 2, 3], "it holds a list"),
])
def test_load_checkpoint_names_a_file_that_is_not_one(tmp_path, checkpoint_bytes, content, why):
    good, state_dict, _ = checkpoint_bytes
    path = tmp_path / "bad.pt"
    data = content(good, state_dict)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        torch.save(data, path)
    with pytest.raises(ValueError) as error:
        load_checkpoint(path)
    message = str(error.value)
    assert message.startswith(f"{path} is not a checkpoint saved by save_checkpoint (")
    assert why in message
    assert "weights_only" not in message and error.value.__cause__ is None
    context = error.value.__context__  # torch's own error, advice included, is not shown
    assert context is None or error.value.__suppress_context__


def test_load_checkpoint_refuses_a_config_dict(tmp_path, checkpoint_bytes):
    good, _, config = checkpoint_bytes
    path = tmp_path / "good.pt"
    path.write_bytes(good)
    clear_error(lambda: load_checkpoint(path, config={"d_model": 8}), "TransformerConfig",
                "dict", kind=TypeError)
    assert load_checkpoint(path, config=config).config == config  # the real thing still loads


# ---------------------------------------------------------------------------------------------
# Property test: random wrong mask shapes for every public function that takes a mask
# ---------------------------------------------------------------------------------------------

def broadcasts(shape, target):
    return len(shape) <= len(target) and all(
        s in (1, t) for s, t in zip(reversed(shape), reversed(target), strict=False))


def legal(shape, scores):
    """The course's contract for a mask over attention scores ``(B, [h,] Lq, Lk)``: bool, with
    as many axes as the scores, broadcasting to them, none empty."""
    return 0 not in shape and len(shape) == len(scores) and broadcasts(shape, scores)


def targets(B, Lq, Lk, tiny_model):
    """(name, call(mask), legal(shape)) for every public entry point that takes a mask. Self-
    attention uses L = Lq; a decoder has T = Lq target and S = Lk source positions."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    T, S, L = Lq, Lk, Lq
    xq, xk = torch.randn(B, Lq, D_MODEL, generator=g), torch.randn(B, Lk, D_MODEL, generator=g)
    mha = MultiHeadAttention(D_MODEL, HEADS)
    enc_layer, dec_layer = EncoderLayer(D_MODEL, HEADS, 16), DecoderLayer(D_MODEL, HEADS, 16)
    encoder, decoder = Encoder(1, D_MODEL, HEADS, 16), Decoder(1, D_MODEL, HEADS, 16)
    model = tiny_model(d_model=D_MODEL, num_heads=HEADS, num_layers=1, d_ff=16)
    src, tgt = torch.randint(3, 12, (B, S), generator=g), torch.randint(3, 12, (B, T), generator=g)
    memory = model.encode(src)
    q3, k3 = torch.randn(B, Lq, 4, generator=g), torch.randn(B, Lk, 4, generator=g)
    w = [torch.randn(D_MODEL, 4, generator=g) for _ in range(3)]
    four = lambda q, k: (B, HEADS, q, k)  # noqa: E731
    self_legal = lambda s: legal(s, four(L, L))  # noqa: E731
    cross_legal = lambda s: legal(s, four(T, S))  # noqa: E731
    return [
        ("scaled_dot_product_attention", lambda m: scaled_dot_product_attention(q3, k3, k3, m),
         lambda s: legal(s, (B, Lq, Lk))),
        ("MultiHeadAttention", lambda m: mha(xq, xk, xk, m), cross_legal),
        ("EncoderLayer", lambda m: enc_layer(xq, m), self_legal),
        ("Encoder", lambda m: encoder(xq, m), self_legal),
        ("DecoderLayer tgt_mask", lambda m: dec_layer(xq, xk, m, None), self_legal),
        ("DecoderLayer memory_mask", lambda m: dec_layer(xq, xk, None, m), cross_legal),
        ("Decoder tgt_mask", lambda m: decoder(xq, xk, m, None), self_legal),
        ("Decoder memory_mask", lambda m: decoder(xq, xk, None, m), cross_legal),
        ("Transformer.encode", lambda m: model.encode(src, m), lambda s: legal(s, four(S, S))),
        ("Transformer.decode src_mask", lambda m: model.decode(tgt, memory, m), cross_legal),
        ("Transformer.decode tgt_mask", lambda m: model.decode(tgt, memory, None, m), self_legal),
        ("Transformer src_mask", lambda m: model(src, tgt, m),
         lambda s: legal(s, four(S, S)) and cross_legal(s)),
        ("Transformer tgt_mask", lambda m: model(src, tgt, None, m), self_legal),
        ("greedy_decode", lambda m: greedy_decode(model, src, 2, BOS, EOS, m),
         lambda s: legal(s, four(1, S))),
        ("beam_search", lambda m: beam_search(model, src[:1], 2, 2, BOS, EOS, m),
         lambda s: legal(s, (1, HEADS, 1, S))),
        ("torch_attn_mask", lambda m: torch_attn_mask(m, B, HEADS, query_len=Lq),
         lambda s: legal(s, four(Lq, s[-1]))),
        ("torch_key_padding_mask", torch_key_padding_mask,
         lambda s: len(s) == 4 and s[1] == s[2] == 1 and 0 not in s),
        ("exercises.masked_softmax",
         lambda m: masked_softmax(torch.randn(B, Lq, Lk, generator=g), m),
         lambda s: legal(s, (B, Lq, Lk))),
        ("exercises.cross_attention", lambda m: cross_attention(xq, xk, *w, m),
         lambda s: legal(s, (B, Lq, Lk))),
    ]


def random_shapes(g, B, Lq, Lk, n):
    """The traps first, then ``n`` random shapes of 1 to 5 axes built from the sizes in play."""
    traps = [(B, Lk), (B, Lq), (B,), (Lk,), (B, Lq, Lk), (B, 1, Lk), (Lq, B), (B, HEADS, Lk, Lq),
             (1, 1, 1, Lk + 1), (B + 1, 1, 1, Lk), (B, HEADS + 1, Lq, Lk), (B, 1, Lq + 1, Lk)]
    right = [(B, 1, 1, Lk), (B, 1, 1, Lq), (1, 1, Lq, Lk), (B, HEADS, Lq, Lq), (Lq, Lk), (1, Lk),
             (1, Lq), (Lq, Lq), (B, Lq, Lk), (1, 1, 1, Lk)]  # right for some entry points
    pool = [1, B, Lq, Lk, HEADS, B + 1, Lk + 1, 0]
    shapes = []
    for _ in range(n):
        ndim = int(torch.randint(1, 6, (1,), generator=g))
        shapes.append(tuple(pool[int(i)] for i in torch.randint(len(pool), (ndim,), generator=g)))
    return list(dict.fromkeys(traps + right + shapes))


@pytest.mark.parametrize("B, Lq, Lk", [(3, 3, 3), (2, 3, 4), (4, 4, 2), (1, 2, 3)])
def test_no_wrong_mask_shape_gets_through(B, Lq, Lk, tiny_model):
    g = torch.Generator().manual_seed(B * 100 + Lq * 10 + Lk)
    shapes = random_shapes(g, B, Lq, Lk, 40)
    checked = {"refused": 0, "accepted": 0}
    for name, call, is_legal in targets(B, Lq, Lk, tiny_model):
        for shape in shapes:
            mask = torch.rand(shape, generator=g) < 0.7
            if is_legal(shape):
                call(mask)  # a right shape must still work
                checked["accepted"] += 1
                continue
            with pytest.raises((ValueError, TypeError)) as error:
                call(mask)
            message = str(error.value)
            assert str(shape) in message, f"{name}: {message!r} does not show the mask {shape}"
            assert re.search(r"expected|must|does not broadcast|read as", message), (name, message)
            checked["refused"] += 1
        with pytest.raises(TypeError, match="bool"):  # an int 0/1 mask: refused before its shape
            call(torch.ones(B, 1, 1, Lk, dtype=torch.long))
    assert checked["refused"] > 100 and checked["accepted"] > 20, checked


# ---------------------------------------------------------------------------------------------
# No endless loop, no silent wrong answer, no raw error from deep inside (a review's ten cases)
# ---------------------------------------------------------------------------------------------

def endless_batches(budget: int = 50):
    """A stream that is meant to be endless: only ``train``'s own limits can stop it. (After
    ``budget`` batches it fails the test instead of letting a regression hang the suite.)"""
    for _ in range(budget):
        yield None
    raise AssertionError(f"train took {budget} batches from an endless stream and did not stop")


@pytest.mark.parametrize("max_steps", [0, -1, 2.5])
def test_train_refuses_a_step_limit_that_would_never_stop(tiny_model, max_steps):
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    calls = []

    def loss(m, batch):
        calls.append(1)
        return m.generator.weight.sum()

    clear_error(lambda: train(model, endless_batches(), loss, optimizer, max_steps=max_steps,
                              progress=False), "max_steps", repr(max_steps))
    assert calls == []  # refused before the first step


def test_train_gpt_with_no_steps_is_refused_at_once(monkeypatch):
    import itertools

    import helpers.continuation as gpt
    from helpers.continuation import train_gpt
    from helpers.gpt import GPTConfig

    real = gpt.continuation_batches  # endless: bounded here, so that a regression cannot hang
    monkeypatch.setattr(gpt, "continuation_batches", lambda *args: itertools.islice(
        itertools.chain(real(*args), endless_batches(0)), 20))
    corpus = make_corpus(num_train=40, num_valid=1, num_test=1)
    clear_error(lambda: train_gpt(corpus, GPTConfig(d_model=8, num_heads=2, num_layers=1,
                                                    d_ff=16), steps=0, batch_size=4,
                                  progress=False), "max_steps must be at least 1, got 0")


def test_training_on_no_data_says_so(tiny_model):
    from helpers.data import batches

    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    clear_error(lambda: list(batches([], 4)), "no sentence pairs", kind=ValueError)
    clear_error(lambda: train(model, [], lambda m, b: m.generator.weight.sum(), optimizer,
                              progress=False), "yielded no batch", kind=ValueError)


@pytest.fixture
def tiny_gpt():
    from helpers.gpt import GPT, GPTConfig

    torch.manual_seed(0)
    return GPT(12, GPTConfig(d_model=8, num_heads=2, num_layers=1, d_ff=16, max_len=8,
                             dropout=0.0)).eval()


@pytest.mark.parametrize("length", [8, 9])
def test_generate_refuses_a_prompt_that_leaves_no_room(tiny_gpt, length):
    """A prompt at or beyond max_len used to give an empty continuation (an empty translation),
    while the model itself refuses such a sequence."""
    from helpers.continuation import continue_translations, joint_vocab, prompt_ids
    from helpers.generation import generate, generate_tokens
    from helpers.gpt import GPT

    shown = (f"the prompt has {length} tokens", "max_len=8", "at most 7 tokens")
    clear_error(lambda: generate(tiny_gpt, [[4] * 3, [4] * length], 3), *shown, kind=ValueError)
    clear_error(lambda: generate_tokens(tiny_gpt, torch.full((1, length), 4), 3), *shown,
                kind=ValueError)
    corpus = make_corpus(num_train=40, num_valid=1, num_test=1)
    vocab = joint_vocab(corpus.src_vocab, corpus.tgt_vocab)
    torch.manual_seed(0)
    tiny_gpt = GPT(len(vocab), tiny_gpt.config)
    short, long = (len(ids) for ids in prompt_ids(["I see", "I see the cat"], vocab))
    tiny_gpt.config.max_len = short + 1  # the short prompt leaves one position free ...
    assert len(continue_translations(tiny_gpt, ["I see"], vocab)) == 1
    clear_error(lambda: continue_translations(tiny_gpt, ["I see the cat"], vocab),  # ... not
                f"the prompt has {long} tokens", kind=ValueError)           # the long one
    assert len(generate(tiny_gpt, [[4] * short], 3)[0]) <= 1  # one free position: one token


def test_generate_refuses_an_empty_prompt(tiny_gpt):
    from helpers.generation import generate

    clear_error(lambda: generate(tiny_gpt, [[]], 3), "at least one token", kind=ValueError)


def test_rotary_attention_with_a_cache_puts_the_new_query_after_the_cached_keys():
    """One query at position 4, after four cached positions, gives the last row of the whole
    causal forward; without the cache (rotated at position 0) it does not."""
    from helpers.attention import KVCache, MultiHeadAttention

    torch.manual_seed(0)
    attention = MultiHeadAttention(16, 2, 0.0, rope=True).eval()
    x = torch.randn(2, 5, 16)
    whole = attention(x, x, x, causal_mask(5)[None, None])  # (2, 5, 16)
    cache = KVCache()
    attention(x[:, :4], x[:, :4], x[:, :4], causal_mask(4)[None, None], cache)
    last = attention(x[:, 4:], x[:, 4:], x[:, 4:], None, cache)  # (2, 1, 16)
    assert (last - whole[:, 4:]).abs().max() < 1e-5
    alone = attention(x[:, 4:], x[:, 4:], x[:, 4:])  # at position 0, over itself only
    assert (alone - whole[:, 4:]).abs().max() > 1e-3


def test_rope_and_cross_attention_do_not_mix():
    from helpers.attention import MultiHeadAttention

    clear_error(lambda: MultiHeadAttention(16, 2, rope=True, cross=True), "cross",
                kind=ValueError)


def test_cached_decode_refuses_another_memory_than_its_caches(tiny_model):
    from helpers.attention import KVCache

    model = tiny_model()
    src = torch.randint(3, 12, (2, 5))
    memory, other = model.encode(src), model.encode(src.flip(1))
    cache = KVCache()
    step = torch.full((2, 1), BOS)
    model.decode(step, memory, cache=cache)
    model.decode(step, memory, cache=cache)  # the same memory: fine
    model.decode(step, memory[:1].expand(2, -1, -1), cache=cache)  # a view of it: fine
    clear_error(lambda: model.decode(step, other, cache=cache), "another memory",
                "new KVCache", kind=ValueError)


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("bos", [12, -1])
def test_decoders_refuse_a_start_token_outside_the_vocabulary(tiny_model, use_cache, bos):
    model, src = tiny_model(), torch.randint(3, 12, (2, 4))
    calls = forward_calls(model)
    clear_error(lambda: greedy_decode(model, src, 5, bos, EOS, use_cache=use_cache),
                f"bos_id={bos}", "ids 0..11", kind=ValueError)
    clear_error(lambda: beam_search(model, src[:1], 2, 5, bos, EOS), f"bos_id={bos}",
                kind=ValueError)
    assert calls == []  # before encoding


def test_cached_decode_names_token_ids_outside_the_vocabulary(tiny_model):
    from helpers.attention import KVCache

    model = tiny_model()
    memory = model.encode(torch.randint(3, 12, (1, 4)))
    clear_error(lambda: model.decode(torch.tensor([[40]]), memory, cache=KVCache()),
                "from 40 to 40", "ids 0..11", kind=ValueError)


@pytest.mark.parametrize("options, shown", [
    ({"top_k": 0}, "top_k must be at least 1, got 0"),
    ({"top_k": -2}, "top_k must be at least 1, got -2"),
    ({"top_k": 2.5}, "top_k must be a whole number"),
    ({"top_p": 1.5}, "top_p must be a probability in [0, 1], got 1.5"),
    ({"top_p": -0.1}, "top_p must be a probability in [0, 1], got -0.1"),
    ({"temperature": 0}, "temperature must be > 0"),
    ({"temperature": -1.0}, "temperature must be > 0"),
])
def test_filter_logits_names_a_setting_out_of_range(options, shown):
    from helpers.generation import filter_logits, sample_next

    logits = torch.randn(2, 6)
    clear_error(lambda: filter_logits(logits, **{"temperature": 1.0, **options}), shown)
    if options.get("temperature") != 0:  # sample_next's temperature 0 is greedy decoding
        clear_error(lambda: sample_next(logits, **{"temperature": 1.0, **options}), shown)


def test_filter_logits_keeps_every_token_when_top_k_is_the_vocabulary_or_more():
    from helpers.generation import filter_logits

    logits = torch.randn(2, 6)
    assert torch.equal(filter_logits(logits, top_k=6), logits)
    assert torch.equal(filter_logits(logits, top_k=60), logits)


@pytest.mark.parametrize("labels, kind, shown", [
    (torch.tensor([1.0, 2.0]), TypeError, "labels must be a tensor of integer class ids"),
    ([1, 2], TypeError, "torch.tensor(labels)"),
    (torch.tensor([1, 5]), ValueError, "class ids in 0..4"),
    (torch.tensor([-3, 2]), ValueError, "from -3 to 2"),
])
def test_label_smoothing_names_bad_labels(labels, kind, shown):
    from helpers.training import label_smoothed_nll

    clear_error(lambda: label_smoothed_nll(torch.randn(2, 5), labels), shown, kind=kind)


def test_label_smoothing_accepts_int32_labels_and_ignores_padding():
    from helpers.training import label_smoothed_nll

    logits, labels = torch.randn(3, 5), torch.tensor([1, -100, 4])
    expected = torch.nn.functional.cross_entropy(logits, labels, label_smoothing=0.1)
    assert torch.allclose(label_smoothed_nll(logits, labels), expected)
    assert torch.allclose(label_smoothed_nll(logits, labels.int()), expected)


def test_vocab_decode_takes_numpy_ids_and_names_what_is_wrong():
    vocab = Vocab(["<pad>", "<bos>", "<eos>", "<unk>", "a", "b", "c", "d"])
    assert vocab.decode(np.array([4, 5])) == vocab.decode(torch.tensor([4, 5])) == "a b"
    assert vocab.decode([np.int64(4), 6]) == "a c"
    message = clear_error(lambda: vocab.decode(np.array([4, 9])), "token id 9", "0..7",
                          kind=ValueError)
    assert "4" not in message.split("token id")[1].split("is not")[0]  # names the bad one only
    clear_error(lambda: vocab.decode([4.0]), "whole numbers", "4.0", kind=TypeError)


def test_gpt_names_token_ids_outside_its_vocabulary(tiny_gpt):
    clear_error(lambda: tiny_gpt(torch.tensor([[3, 20]])), "from 3 to 20", "ids 0..11",
                kind=ValueError)


@pytest.mark.parametrize("call, shown", [
    (lambda: make_corpus(num_train=0), "num_train must be at least 1, got 0"),
    (lambda: make_corpus(num_test=-5), "num_test must be at least 1, got -5"),
])
def test_make_corpus_refuses_empty_splits(call, shown):
    clear_error(call, shown)


def test_rotary_pieces_name_their_shapes():
    from helpers.layers import RMSNorm
    from helpers.positional import apply_rope, rope_angles

    clear_error(lambda: rope_angles(5, 7), "d_k must be even", "7", kind=ValueError)
    clear_error(lambda: apply_rope(torch.randn(1, 5, 8), rope_angles(4, 8)), "(1, 5, 8)", "(4, 4)",
                kind=ValueError)
    clear_error(lambda: apply_rope(torch.randn(1, 5, 7), rope_angles(5, 8)), "even d_k",
                kind=ValueError)
    clear_error(lambda: RMSNorm(0), "d_model must be at least 1", kind=ValueError)


def test_greedy_sampling_still_checks_its_filters():
    from helpers.generation import sample_next

    clear_error(lambda: sample_next(torch.randn(1, 5), 0.0, top_p=2.0), "top_p", "2.0")


def test_beam_search_names_a_length_penalty_that_is_not_a_number(tiny_model):
    clear_error(lambda: beam_search(tiny_model(), torch.randint(3, 12, (1, 4)), 2, 5, BOS, EOS,
                                    length_penalty="0.6"), "length_penalty", "'0.6'",
                kind=TypeError)


def test_generate_takes_a_tensor_of_prompts(tiny_gpt):
    from helpers.generation import generate

    prompts = torch.tensor([[4, 5, 6], [7, 8, 9]])
    assert generate(tiny_gpt, prompts, 3) == generate(tiny_gpt, prompts.tolist(), 3)


@pytest.mark.parametrize("steps", [0, -3])
def test_train_distributed_refuses_no_steps(steps):
    from helpers.distributed import parse_args, train_distributed

    clear_error(lambda: train_distributed(0, 1, parse_args(["--steps", str(steps)])),
                f"steps must be at least 1, got {steps}", kind=ValueError)
