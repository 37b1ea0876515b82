"""The whole model (causality, padding, errors) and decoding (cache, batching, beam search), on
tests/conftest.py's ``tiny_model``."""

import itertools
import math

import pytest
import torch

from helpers.data import BOS_ID as BOS
from helpers.data import EOS_ID as EOS
from helpers.data import PAD_ID as PAD
from helpers.attention import KVCache
from helpers.decoding import beam_search, greedy_decode
from helpers.masks import causal_mask, padding_mask
from helpers.model import Transformer


def test_shapes_and_embedding_scale(tiny_model):
    model = tiny_model()
    src, tgt = torch.randint(3, 12, (2, 7)), torch.randint(3, 12, (2, 5))
    assert model.encode(src).shape == (2, 7, 32)
    assert model(src, tgt).shape == (2, 5, 12)
    embedded = model.tgt_embed.weight * math.sqrt(model.d_model)
    assert 0.7 < embedded.std().item() < 1.3  # on the scale of the positional encoding


def test_tie_weights_shares_one_matrix():
    model = Transformer(10, 10, d_model=16, num_heads=2, num_layers=1, d_ff=32, tie_weights=True)
    assert model.generator.weight is model.tgt_embed.weight


def test_decoder_is_causal(tiny_model):
    """Changing future target tokens changes no earlier output."""
    model = tiny_model()
    src = torch.randint(3, 12, (1, 6))
    tgt = torch.randint(3, 12, (1, 8))
    changed = tgt.clone()
    changed[0, 5:] = torch.randint(3, 12, (3,))
    a, b = model(src, tgt), model(src, changed)
    assert (a[:, :5] - b[:, :5]).abs().max() <= 1e-5
    assert (a[:, 5:] - b[:, 5:]).abs().max() > 1e-3  # the future positions do see the change


def test_given_tgt_mask_is_used_as_is(tiny_model):
    model = tiny_model()
    src, tgt = torch.randint(3, 12, (1, 6)), torch.randint(3, 12, (1, 5))
    full = torch.ones(1, 1, 5, 5, dtype=torch.bool)  # no causal part: earlier outputs see the future
    changed = tgt.clone()
    changed[0, -1] = (tgt[0, -1] + 1 - 3) % 9 + 3
    diff = (model(src, tgt, tgt_mask=full) - model(src, changed, tgt_mask=full))[:, 0]
    assert diff.abs().max() > 1e-4
    assert torch.allclose(model(src, tgt, tgt_mask=causal_mask(5)[None, None]), model(src, tgt), atol=1e-6)


def test_source_padding_invariance(tiny_model):
    model = tiny_model()
    src = torch.randint(3, 12, (1, 5))
    padded = torch.cat([src, torch.full((1, 3), PAD)], dim=1)
    tgt = torch.randint(3, 12, (1, 4))
    a = model(src, tgt)
    b = model(padded, tgt, src_mask=padding_mask(padded, PAD))
    assert (a - b).abs().max() <= 1e-5


@pytest.mark.parametrize("bad, message", [
    (torch.tensor([[3, 4, 99]]), r"ids from 3 to 99.*0\.\.11"),
    (torch.tensor([[3, -1, 4]]), r"ids from -1 to 4"),
    (torch.tensor([3, 4, 5]), r"\(B, L\).*\(3,\)"),
    (torch.tensor([[3.0, 4.0]]), r"token ids.*torch.int64 or torch.int32, got torch.float32"),
])
def test_bad_token_ids_give_clear_errors(bad, message, tiny_model):
    with pytest.raises((ValueError, TypeError), match=message):
        tiny_model().encode(bad)


def test_mismatched_batches_and_too_long_inputs(tiny_model):
    model = tiny_model(max_len=8)
    with pytest.raises(ValueError, match="same batch size, got 2 and 3"):
        model(torch.randint(3, 12, (2, 4)), torch.randint(3, 12, (3, 4)))
    with pytest.raises(ValueError, match="length 9 is longer than max_len=8"):
        model.encode(torch.randint(3, 12, (1, 9)))


# ---------------------------------------------------------------- greedy decoding
def test_greedy_rows_start_with_bos_and_stay_eos(tiny_model):
    model = tiny_model()
    out = greedy_decode(model, torch.randint(3, 12, (6, 5)), max_len=10, bos_id=BOS, eos_id=EOS)
    assert out.shape[0] == 6 and out.shape[1] <= 11
    assert torch.all(out[:, 0] == BOS)
    for row in out.tolist():
        if EOS in row[1:]:
            first = row.index(EOS, 1)
            assert all(t == EOS for t in row[first:])


def test_greedy_matches_argmax_of_full_forward(tiny_model):
    model = tiny_model()
    src = torch.randint(3, 12, (1, 5))
    out = greedy_decode(model, src, max_len=6, bos_id=BOS, eos_id=EOS, use_cache=False)
    logits = model(src, out[:, :-1])
    assert torch.equal(logits.argmax(-1)[0], out[0, 1:])


@pytest.mark.parametrize("seed", range(4))
def test_kv_cache_gives_the_same_tokens(seed, tiny_model):
    model = tiny_model(seed=seed)
    src = torch.randint(3, 12, (5, 7))
    cached = greedy_decode(model, src, max_len=15, bos_id=BOS, eos_id=EOS, use_cache=True)
    plain = greedy_decode(model, src, max_len=15, bos_id=BOS, eos_id=EOS, use_cache=False)
    assert torch.equal(cached, plain)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("chunk", [1, 2])  # new tokens per step: causal among themselves too
def test_kv_cache_logits_match_recomputation(norm_first, chunk, tiny_model):
    model = tiny_model(norm_first=norm_first)
    src, tgt = torch.randint(3, 12, (2, 6)), torch.randint(3, 12, (2, 6))
    src[1, 4:] = PAD
    src_mask = padding_mask(src, PAD)
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        full = model.decode(tgt, memory, src_mask)
        cache = KVCache()
        steps = [model.decode(tgt[:, t:t + chunk], memory, src_mask, cache=cache)
                 for t in range(0, 6, chunk)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-4)  # logits ~30
    assert cache.length == 6
    layers = model.decoder.layers
    assert cache.kv[layers[0].self_attn][0].shape == (2, 4, 6, 8)  # (B, h, t, d_k): per position
    assert cache.kv[layers[1].cross_attn][1].shape == (2, 4, 6, 8)  # (B, h, S, d_k): the memory


def test_kv_cache_reorder_keeps_the_chosen_rows(tiny_model):
    model = tiny_model()
    src, tgt = torch.randint(3, 12, (3, 5)), torch.randint(3, 12, (3, 2))
    cache = KVCache()
    with torch.no_grad():
        model.decode(tgt, model.encode(src), cache=cache)
    self_attn, cross_attn = model.decoder.layers[0].self_attn, model.decoder.layers[1].cross_attn
    before = cache.kv[self_attn][0].clone()
    cache.reorder(torch.tensor([2, 0, 0]))
    assert torch.equal(cache.kv[self_attn][0], before[[2, 0, 0]])
    assert cache.kv[cross_attn][0].shape[0] == 3


def test_batched_greedy_equals_one_by_one_with_padding(tiny_model):
    model = tiny_model(seed=3)
    lengths = [3, 6, 4, 5]
    sources = [torch.randint(3, 12, (1, n)) for n in lengths]
    batch = torch.full((4, 6), PAD)
    for i, s in enumerate(sources):
        batch[i, :s.shape[1]] = s[0]
    together = greedy_decode(model, batch, 12, BOS, EOS, src_mask=padding_mask(batch, PAD))
    for i, s in enumerate(sources):
        alone = greedy_decode(model, s, 12, BOS, EOS)[0]
        row = together[i, :alone.shape[0]]
        assert torch.equal(row, alone)
        assert torch.all(together[i, alone.shape[0]:] == EOS)


def test_decoding_restores_training_mode(tiny_model):
    model = tiny_model().train()
    greedy_decode(model, torch.randint(3, 12, (1, 4)), 3, BOS, EOS)
    beam_search(model, torch.randint(3, 12, (1, 4)), 2, 3, BOS, EOS)
    assert model.training


# ---------------------------------------------------------------- beam search
def sequence_log_prob(model, src, tokens):
    """Sum of log p(token) for a whole generated sequence, by teacher forcing."""
    tgt = torch.tensor([[BOS] + tokens[:-1]])
    log_probs = model(src, tgt).log_softmax(-1)[0]
    return sum(log_probs[i, t].item() for i, t in enumerate(tokens))


@pytest.mark.parametrize("seed", range(4))
def test_beam_size_one_equals_greedy(seed, tiny_model):
    model = tiny_model(seed=seed)
    src = torch.randint(3, 12, (1, 6))
    greedy = greedy_decode(model, src, 10, BOS, EOS)[0, 1:].tolist()
    if EOS in greedy:
        greedy = greedy[:greedy.index(EOS) + 1]
    (tokens, score), = beam_search(model, src, beam_size=1, max_len=10, bos_id=BOS, eos_id=EOS)
    assert tokens == greedy
    assert score == pytest.approx(sequence_log_prob(model, src, tokens), abs=1e-4)


def exhaustive(model, src, vocab, max_len, length_penalty):
    others = [t for t in range(vocab) if t != EOS]
    hypotheses = []
    for n in range(1, max_len + 1):
        for prefix in itertools.product(others, repeat=n - 1):
            hypotheses.append(list(prefix) + [EOS])
    hypotheses += [list(p) for p in itertools.product(others, repeat=max_len)]
    scored = [(h, sequence_log_prob(model, src, h) / len(h) ** length_penalty) for h in hypotheses]
    return sorted(scored, key=lambda pair: pair[1], reverse=True), len(hypotheses)


@pytest.mark.parametrize("length_penalty", [0.0, 1.0, 0.6])
def test_wide_beam_equals_exhaustive_search(length_penalty, tiny_model):
    vocab, max_len = 4, 3
    model = tiny_model(vocab=vocab, seed=1, d_model=16, num_layers=1, d_ff=32)
    with torch.no_grad():
        model.generator.weight.mul_(0.1)  # flatter distribution: the best ones are close
    src = torch.randint(0, vocab, (1, 4))
    best, count = exhaustive(model, src, vocab, max_len, length_penalty)
    found = beam_search(model, src, beam_size=count, max_len=max_len, bos_id=BOS, eos_id=EOS,
                        length_penalty=length_penalty)
    assert len(found) == count
    assert [t for t, _ in found[:5]] == [t for t, _ in best[:5]]
    for (_, ours), (_, ref) in zip(found, best, strict=True):
        assert ours == pytest.approx(ref, abs=1e-4)


def test_beam_keeps_finished_hypotheses_and_scores_with_log_probs(tiny_model):
    model = tiny_model(seed=2)
    src = torch.randint(3, 12, (1, 5))
    results = beam_search(model, src, beam_size=4, max_len=8, bos_id=BOS, eos_id=EOS)
    assert 1 <= len(results) <= 4
    scores = [s for _, s in results]
    assert scores == sorted(scores, reverse=True)
    for tokens, score in results:
        assert len(tokens) <= 8
        assert tokens[-1] == EOS or len(tokens) == 8
        assert EOS not in tokens[:-1]  # never extended after EOS
        assert score == pytest.approx(sequence_log_prob(model, src, tokens), abs=1e-4)


def test_beam_search_errors(tiny_model):
    model = tiny_model()
    with pytest.raises(ValueError, match=r"one sentence.*\(2, 4\)"):
        beam_search(model, torch.randint(3, 12, (2, 4)), 2, 5, BOS, EOS)
    with pytest.raises(ValueError, match="at least 1"):
        beam_search(model, torch.randint(3, 12, (1, 4)), 0, 5, BOS, EOS)
    with pytest.raises(ValueError, match="max_len must be at least 1"):
        greedy_decode(model, torch.randint(3, 12, (1, 4)), 0, BOS, EOS)


def test_decode_checks_the_memory_batch(tiny_model):
    model = tiny_model()
    memory = model.encode(torch.randint(3, 12, (2, 5)))
    with pytest.raises(ValueError, match=r"batch size of tgt \(1\), got \(2, 5, 32\)"):
        model.decode(torch.randint(3, 12, (1, 4)), memory)
