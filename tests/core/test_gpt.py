"""helpers/gpt.py, generation.py and continuation.py: the decoder-only model, its data, sampling
filters and the modern block's parts (helpers/layers.py, positional.py), checked against PyTorch's own modules and by their defining properties."""

import json

import pytest
import torch
from torch import nn

from helpers.course import ASSETS
from helpers.continuation import (
    SEP,
    VARIANTS,
    compare_blocks,
    continuation_batch,
    continuation_batches,
    joint_vocab,
    prompt_ids,
    split_by_length,
)
from helpers.generation import filter_logits, generate
from helpers.gpt import GPT, GPTConfig
from helpers.layers import RMSNorm, SwiGLU
from helpers.positional import apply_rope, rope_angles
from helpers.translation import CORPUS_ARGS, make_corpus

SMALL = dict(d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.0, max_len=40)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(**{**CORPUS_ARGS, "num_train": 200})


def test_rmsnorm_matches_torch():
    ours, theirs = RMSNorm(24, eps=1e-6), nn.RMSNorm(24, eps=1e-6)
    x = torch.randn(3, 5, 24) + 3  # a mean far from 0: RMSNorm must not remove it
    assert ours(x).mean(-1).min() > 0.5  # unlike LayerNorm's output, whose mean is 0
    with torch.no_grad():
        ours.weight.copy_(torch.randn(24))
        theirs.weight.copy_(ours.weight)
    torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-5)


def test_swiglu_is_the_gated_formula_and_has_the_relu_networks_size():
    ffn = SwiGLU(16, 40)
    x = torch.randn(2, 3, 16)
    want = (nn.functional.silu(x @ ffn.w1.weight.T) * (x @ ffn.w3.weight.T)) @ ffn.w2.weight.T
    torch.testing.assert_close(ffn(x), want)
    relu_sized = GPT(30, GPTConfig(**SMALL)).blocks[0].feed_forward
    swiglu_sized = GPT(30, GPTConfig(**SMALL, ffn="swiglu")).blocks[0].feed_forward
    count = [sum(p.numel() for p in f.parameters()) for f in (relu_sized, swiglu_sized)]
    assert abs(count[1] - count[0]) / count[0] < 0.05  # 2/3 of d_ff: about the same parameters


def test_rope_scores_depend_only_on_the_offset():
    q, k = torch.randn(8), torch.randn(8)
    angles = rope_angles(50, 8)

    def score(p, r):  # query at position p, key at position r
        return apply_rope(q[None], angles[p:p + 1])[0] @ apply_rope(k[None], angles[r:r + 1])[0]

    for offset in (0, 1, 7):
        scores = torch.stack([score(p + offset, p) for p in (0, 5, 30, 41)])
        torch.testing.assert_close(scores, scores[0].expand(4), rtol=1e-4, atol=1e-4)
    assert not torch.allclose(score(3, 0), score(4, 0))  # but the offset matters
    x = torch.randn(2, 3, 10, 8)  # a rotation keeps every pair's length
    torch.testing.assert_close(apply_rope(x, rope_angles(10, 8)).norm(dim=-1), x.norm(dim=-1))


def test_rope_rotates_adjacent_pairs_like_notebook_02():
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0]])  # pairs (x0, x1) and (x2, x3)
    angle = torch.tensor(3.0)  # position 3; the first pair turns by 1 radian per position
    rotated = apply_rope(x, rope_angles(4, 4)[3:4])[0]
    torch.testing.assert_close(rotated[:2], torch.stack([angle.cos(), angle.sin()]))
    slow = 3.0 * 10000.0 ** -0.5  # the second pair: base^(-2/4) per position
    slow = torch.tensor(slow)
    torch.testing.assert_close(rotated[2:], torch.stack([slow.cos(), slow.sin()]))


def test_continuation_batch_scores_the_french_part_only(corpus):
    vocab = joint_vocab(corpus.src_vocab, corpus.tgt_vocab)
    (en1, fr1), (en2, fr2) = sorted(corpus.train[:2], key=lambda p: -len(p[0].split()))
    batch = continuation_batch([(en1, fr1), (en2, fr2)], vocab)
    n, m = len(en1.split()), len(fr1.split())
    words = [vocab.tokens[i] for i in batch.tokens[0].tolist()]
    assert words[:n + 2 + m] == ["<bos>", *en1.split(), SEP, *fr1.split()]  # no <eos> as input
    labels = [vocab.tokens[i] for i in batch.labels[0].tolist()]
    # position t is scored on token t + 1: nothing until <sep>, which predicts the first French word
    assert labels[:n + 2 + m] == ["<pad>"] * (n + 1) + [*fr1.split(), "<eos>"]
    assert batch.tokens.shape == batch.labels.shape == (2, batch.mask.shape[-1])
    assert batch.mask.shape[:2] == (2, 1)
    assert "<unk>" not in words and set(vocab.tokens[4:]) >= set(en1.split()) | set(fr1.split())


@pytest.mark.parametrize("changes", [{}, {"norm_first": False}, {"positions": "rope"},
                                     {"positions": "learned", "norm": "rms", "ffn": "swiglu"}])
def test_the_kv_cache_gives_the_outputs_of_the_whole_forward(corpus, changes):
    torch.manual_seed(0)
    vocab = joint_vocab(corpus.src_vocab, corpus.tgt_vocab)
    model = GPT(len(vocab), GPTConfig(**{**SMALL, **changes})).eval()
    prompts = prompt_ids(["I like the cat", "we eat", "she has a dog"], vocab)
    cached = generate(model, prompts, 12, use_cache=True)
    uncached = generate(model, prompts, 12, use_cache=False)
    assert cached == uncached and any(len(ids) > 3 for ids in cached)


def test_sampling_filters():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    kept = filter_logits(logits, top_k=2)
    assert torch.isinf(kept[0, 2:]).all() and torch.isfinite(kept[0, :2]).all()
    p = logits.softmax(-1)[0]  # 0.64, 0.24, 0.09, 0.03
    assert torch.isfinite(filter_logits(logits, top_p=0.5)[0]).tolist() == [True, False, False,
                                                                            False]
    # the token that crosses the threshold is kept: 0.64 < 0.7 <= 0.64 + 0.24
    assert torch.isfinite(filter_logits(logits, top_p=0.7)[0]).sum() == 2
    assert torch.isfinite(filter_logits(logits, top_p=float(p[:2].sum()) + 1e-3)[0]).sum() == 3
    torch.testing.assert_close(filter_logits(logits, temperature=2.0), logits / 2)
    assert torch.isfinite(filter_logits(logits, top_p=0.0)[0]).tolist() == [True, False, False,
                                                                            False]  # greedy
    with pytest.raises(ValueError, match="temperature must be > 0"):
        filter_logits(logits, temperature=0)


def test_sampling_is_seeded_and_greedy_is_the_limit_of_a_low_temperature(corpus):
    torch.manual_seed(1)
    vocab = joint_vocab(corpus.src_vocab, corpus.tgt_vocab)
    model = GPT(len(vocab), GPTConfig(**SMALL)).eval()
    prompts = prompt_ids(["I like the cat"] * 4, vocab)
    draws = [generate(model, prompts, 8, temperature=1.5,
                      generator=torch.Generator().manual_seed(seed)) for seed in (0, 0, 1)]
    assert draws[0] == draws[1] != draws[2]
    cold = generate(model, prompts, 8, temperature=1e-4, generator=torch.Generator().manual_seed(0))
    assert cold == generate(model, prompts, 8)


def test_bad_configurations_and_inputs_say_what_is_wrong(corpus):
    with pytest.raises(ValueError, match=r"GPTConfig.norm must be one of \('layer', 'rms'\)"):
        GPT(10, GPTConfig(**{**SMALL, "norm": "batch"}))
    model = GPT(10, GPTConfig(**SMALL))
    with pytest.raises(ValueError, match="position 40 is beyond max_len=40"):
        model(torch.zeros(1, 41, dtype=torch.long))


def test_a_small_ablation_runs_every_variant_and_seed(corpus):
    variants = {name: VARIANTS[name] for name in ("post-norm (2017)", "pre-norm + RoPE")}
    rows = compare_blocks(corpus, variants, seeds=(0, 1), steps=3, batch_size=8, **SMALL)
    assert [(r["variant"], r["seed"]) for r in rows] == [(v, s) for v in variants for s in (0, 1)]
    shipped = json.loads((ASSETS / "gpt_ablation.json").read_text())["ablation"]
    assert set(rows[0]) == set(shipped[0])  # the shipped file has what the runner writes
    for r in rows:
        assert 0 <= r["exact_match"] <= 100 and r["final_loss"] > 0 and r["seconds"] > 0
    assert rows[0]["final_loss"] != rows[1]["final_loss"]  # the seeds differ


@pytest.mark.parametrize("steps", [3, 30])
def test_ablation_final_loss_is_the_mean_of_the_last_losses(corpus, monkeypatch, steps):
    """``final_loss`` is the mean of the last min(20, steps) training losses, read here from the
    losses the real training returned (fewer than 20 steps used to be divided by 20)."""
    import helpers.continuation as gpt

    seen = []

    def recording(*args, **kwargs):
        model, vocab, losses = real(*args, **kwargs)
        seen.append(list(losses))
        return model, vocab, losses

    real = gpt.train_gpt
    monkeypatch.setattr(gpt, "train_gpt", recording)
    variants = {"post-norm (2017)": VARIANTS["post-norm (2017)"]}
    (row,) = compare_blocks(corpus, variants, seeds=(0,), steps=steps, batch_size=8, **SMALL)
    (losses,) = seen
    assert len(losses) == steps
    last = losses[-min(20, steps):]
    assert row["final_loss"] == pytest.approx(sum(last) / len(last), rel=1e-12)
    assert row["final_loss"] > 1.0  # a few steps from random weights: far above 0


def test_continuation_batches_with_too_few_pairs_raise_at_once(corpus):
    vocab = joint_vocab(corpus.src_vocab, corpus.tgt_vocab)
    with pytest.raises(ValueError, match=r"batch_size=8 needs between 1 and len\(pairs\) = 5"):
        next(continuation_batches(corpus.train[:5], vocab, 8))
    with pytest.raises(ValueError, match=r"batch_size=0"):
        next(continuation_batches(corpus.train[:5], vocab, 0))
    assert len(next(continuation_batches(corpus.train[:5], vocab, 5)).tokens) == 5


def test_the_shipped_ablation_has_every_variant_and_seed():
    """assets/gpt_ablation.json (the notebook reruns it with RUN_ABLATION = True): every variant,
    3 seeds, the length test; the modern block learns at least as well as the 2017 one. Its keys
    are compared with what the runner writes in
    test_a_small_ablation_runs_every_variant_and_seed."""
    shipped = json.loads((ASSETS / "gpt_ablation.json").read_text())
    rows = shipped["ablation"]
    assert [(r["variant"], r["seed"]) for r in rows] == [(v, s) for v in VARIANTS
                                                         for s in (0, 1, 2)]
    long = shipped["length_generalisation"]
    assert long["max_words"] == 6 and len(long["rows"]) == 9

    def mean(name, key="exact_match"):
        return sum(r[key] for r in rows if r["variant"] == name) / 3

    assert mean("modern: RMSNorm + SwiGLU + RoPE") >= mean("post-norm (2017)")


def test_split_by_length_keeps_short_training_and_long_test_sentences(corpus):
    split = split_by_length(corpus, 5)
    assert split.train and all(len(en.split()) <= 5 for en, _ in split.train)
    assert split.test and all(len(en.split()) > 5 for en, _ in split.test)
    assert split.src_vocab is corpus.src_vocab
