"""What is particular to each notebook's exercises: learners' other spellings of a right answer
pass and of a known bug get its hint, each bug shows on the case built for it, and the references
written in helpers/exercises agree with the modules the course builds (the exact parameter count
of a real model included).

What holds for every exercise is in test_exercise_registry.py.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from helpers.attention import MultiHeadAttention
from helpers.decoding import beam_step
from helpers.exercises.compare import same
from helpers.exercises.engine import _call, lookup
from helpers.exercises.nb01 import masked_softmax
from helpers.exercises.nb02 import add_positional_encoding, pe_rotation
from helpers.exercises.nb04 import feed_forward, residual_sublayer
from helpers.exercises.nb05 import embed_tokens
from helpers.exercises.nb07 import cross_attention, shift_right
from helpers.exercises.nb08 import output_projection, total_parameters
from helpers.layers import EncoderLayer, FeedForward, LayerNorm
from helpers.masks import causal_mask, padding_mask
from helpers.model import Transformer
from helpers.positional import PositionalEncoding, sinusoidal_encoding
from helpers.training import label_smoothed_nll, transformer_lr


def variant(name, pid, label=None):
    return next(p.variant for p in lookup(name).pitfalls
                if p.id == pid and (label is None or p.name == label))


def outcome_per_case(name, fn):
    """For each case: does ``fn`` agree with the reference (shape and values; raising = no)?"""
    exercise = lookup(name)
    return {case.label: same(_call(fn, case), case.run(exercise.reference), exercise)
            for case in exercise.cases()}


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


def my_layer_norm(x, weight, bias, eps=1e-5):  # F.layer_norm is refused: the text forbids it
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    return (x - mean) * torch.rsqrt(var + eps) * weight + bias


def my_split_heads(x, num_heads):
    B, L, _ = x.shape
    return x.reshape(B, L, num_heads, -1).permute(0, 2, 1, 3)


def my_merge_heads(x):
    B, h, L, d_k = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(B, L, h * d_k)


def my_embed_tokens(tokens, weight, pe):
    e = F.embedding(tokens, weight)
    return e * weight.shape[-1] ** 0.5 + pe[: tokens.shape[-1]].unsqueeze(0)


def my_residual_sublayer(x, sublayer, norm, norm_first):
    if not norm_first:
        return norm(sublayer(x) + x)
    y = norm(x)
    return sublayer(y) + x


def my_shift_right(target, bos_id):
    out = torch.empty_like(target)
    out[:, 0] = bos_id
    out[:, 1:] = target[:, :-1]
    return out


def my_cross_attention(x, memory, w_q, w_k, w_v, memory_mask=None):
    q, k, v = x @ w_q, memory @ w_k, memory @ w_v
    scores = torch.einsum("btd,bsd->bts", q, k) / q.shape[-1] ** 0.5
    if memory_mask is not None:
        scores = scores.masked_fill(~memory_mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def my_label_smoothed_nll(logits, labels, epsilon, ignore_index):
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), label_smoothing=epsilon,
                           ignore_index=ignore_index)


def my_beam_step(sums, log_probs, beam_size, eos_id, last_step=False):
    """Every candidate in a sorted Python list, tensors in the tuples."""
    V = log_probs.shape[1]
    everything = sorted(((sums[row] + log_probs[row, token], row, token)
                         for row in range(len(sums)) for token in range(V)),
                        key=lambda c: c[0].item(), reverse=True)
    ended = [(torch.tensor(row), torch.tensor(token), total)
             for total, row, token in everything[:beam_size] if token == eos_id or last_step]
    kept = [(row, token, total) for total, row, token in everything
            if token != eos_id and not last_step][:beam_size]
    return ended, kept


def real_model_count(*sizes, tie_weights=False):
    """Parameters of the real model, built on the meta device (no memory, no initialisation)."""
    d_model, num_heads, d_ff, num_layers, src_vocab, tgt_vocab = sizes
    with torch.device("meta"):
        model = Transformer(src_vocab, tgt_vocab, d_model, num_heads, num_layers, d_ff,
                            tie_weights=tie_weights)
    return sum(p.numel() for p in model.parameters())


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
    ("embed_tokens", my_embed_tokens),
    ("residual_sublayer", my_residual_sublayer),
    ("causal_mask", lambda n: ~torch.ones(n, n, dtype=torch.bool).triu(1)),
    ("padding_mask", lambda t, p: (t != p).unsqueeze(1).unsqueeze(2)),
    ("shift_right", my_shift_right),
    ("cross_attention", my_cross_attention),
    ("count_parameters", total_parameters),  # a plain int
    ("count_parameters", lambda *sizes: float(total_parameters(*sizes))),  # a whole float
    ("count_parameters", lambda *sizes: torch.tensor(total_parameters(*sizes))),
    ("count_parameters", real_model_count),  # counting a model
    ("output_projection", lambda x, w, b: F.linear(x, w, b)),
    ("output_projection", lambda x, w, b: torch.einsum("...d,vd->...v", x, w) + b),
    ("transformer_lr", transformer_lr),  # returns a float
    ("transformer_lr", lambda s, d, w: min(1 / math.sqrt(s), s / w ** 1.5) / math.sqrt(d)),
    ("label_smoothed_nll", my_label_smoothed_nll),
    ("beam_step", my_beam_step),
    ("zero_head", lambda x, head, h: (x.unflatten(-1, (h, -1))  # (B, L, h, d_k), a mask
                                      * (torch.arange(h) != head)[:, None]).flatten(-2)),
])
def test_other_correct_spellings_pass(run_check, name, fn):
    if fn is real_model_count:  # its first model imports torch._dynamo: 10 s on a busy machine
        real_model_count(8, 2, 16, 1, 10, 12)
    ok, out = run_check(name, fn)
    assert ok is True, out


@pytest.mark.parametrize("name, fn, shown", [
    ("masked_softmax", lambda s, m: torch.where(m, s, float("-inf")).softmax(-1), "[A5]"),
    ("layer_norm",
     lambda x, w, b, eps=1e-5: (x - x.mean(-1, keepdim=True))
     / (x.var(-1, keepdim=True, correction=0).sqrt() + eps) * w + b, "[N2]"),
    ("split_heads", lambda x, h: x.reshape(x.shape[0], x.shape[1], -1, h).transpose(1, 2),
     "[H1]"),
    ("add_positional_encoding", lambda x, pe: pe[:, :x.shape[1]] + x, "[P4]"),
    ("causal_mask", lambda n: torch.triu(torch.ones(n, n)).bool(), "[M1]"),
    ("padding_mask", lambda t, p: t.eq(p).unsqueeze(1).unsqueeze(1), "[M4]"),
    ("shift_right", lambda target, bos_id: target, "[T1]"),  # the target itself, not a copy
    ("shift_right", lambda target, bos_id: F.pad(target[:, 1:], (0, 1), value=bos_id),
     "shift right, not left"),
    # raw matmuls raise other errors than the variant when S != T; the hint still comes
    ("cross_attention", lambda x, memory, w_q, w_k, w_v, memory_mask=None:
     my_cross_attention(memory, x, w_q, w_k, w_v, memory_mask), "the arguments are swapped"),
    ("residual_sublayer", lambda x, sublayer, norm, norm_first: x, "❌ residual_sublayer: "),
])
def test_other_spellings_of_a_bug_get_its_hint(run_check, name, fn, shown):
    ok, out = run_check(name, fn)
    assert ok is False
    assert shown in out, out


def test_causal_mask_on_the_memory_written_with_causal_mask_gets_its_hint(run_check):
    """``causal_mask(T)`` on the memory only runs when S == T; the hint comes anyway."""
    def learner(x, memory, w_q, w_k, w_v, memory_mask=None):
        mask = causal_mask(x.shape[1])[None]  # (1, T, T) for the scores (B, T, S)
        if memory_mask is not None:
            mask = mask & memory_mask
        return my_cross_attention(x, memory, w_q, w_k, w_v, mask)

    ok, out = run_check("cross_attention", learner)
    assert ok is False and "look-ahead mask belongs to the decoder's self-attention" in out, out


# --------------------------------------------------------------------------------------------
# The cases: each bug only shows on some inputs
# --------------------------------------------------------------------------------------------

def test_nan_rows_only_show_with_a_fully_masked_row():
    for name in ("scaled_dot_product_attention", "masked_softmax"):
        agrees = outcome_per_case(name, variant(name, "A5", "NaN for a fully masked row"))
        fully_masked = [label for label in agrees if "fully masked row" in label]
        assert fully_masked and all(agrees.pop(label) is False for label in fully_masked)
        assert all(agrees.values())


def test_wrong_head_split_only_shows_when_d_k_differs_from_h():
    agrees = outcome_per_case("split_heads", variant("split_heads", "H1", "view(B, L, d_k, h)"))
    assert agrees["d_model=16, h=4 (d_k = h)"] is True  # the case where the bug hides
    assert agrees["d_model=24, h=4 (d_k=6 != h)"] is False


def test_eps_outside_the_root_needs_a_large_eps():
    agrees = outcome_per_case("layer_norm", variant("layer_norm", "N2",
                                                    "eps outside the square root"))
    assert agrees["random (2, 3, 6)"] is True  # eps=1e-5 is too small to see
    assert agrees["eps=0.1, small inputs"] is False


def test_wrong_slice_of_the_table_shows_as_a_shape_for_length_1():
    agrees = outcome_per_case("add_positional_encoding", variant("add_positional_encoding", "P4"))
    assert agrees["length 1"] is False


def test_label_smoothing_cases_contain_padding_and_epsilon_zero():
    cases = lookup("label_smoothed_nll").cases()
    assert any((labels == ignore).any() for _, labels, _, ignore in (c.args for c in cases))
    assert any(epsilon == 0.0 for _, _, epsilon, _ in (c.args for c in cases))


# --------------------------------------------------------------------------------------------
# Numbers: a count must be exact, a rate right to 1e-5 relative
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sizes", [
    (8, 2, 16, 1, 10, 12), (16, 4, 64, 2, 20, 20), (12, 3, 24, 3, 7, 30), (6, 1, 6, 1, 5, 5),
    (512, 8, 2048, 6, 37000, 37000),
])
def test_parameter_count_equals_the_real_model(sizes):
    assert total_parameters(*sizes) == real_model_count(*sizes)


def test_base_model_numbers():
    """The numbers notebook 08 prints: 101.0M with three matrices, 82.1M with tie_weights."""
    base = (512, 8, 2048, 6, 37000, 37000)
    assert total_parameters(*base) == 101_007_496
    assert real_model_count(*base, tie_weights=True) == 101_007_496 - 37000 * 512
    assert total_parameters(512, 1, 2048, 6, 37000, 37000) == total_parameters(*base)  # heads


def test_a_wrong_count_names_both_numbers(run_check):
    ok, out = run_check("count_parameters", lambda *sizes: total_parameters(*sizes) + 3)
    assert ok is False
    assert "expected 1788, got 1791 (largest difference 3)" in out
    assert "[case: d_model=8, num_heads=2, d_ff=16, num_layers=1, src_vocab=10, tgt_vocab=12]" \
        in out


@pytest.mark.parametrize("fn, shown", [
    (lambda *sizes: total_parameters(*sizes) + 0.5,
     "expected dtype torch.int64, got torch.float64"),
    (lambda *sizes: str(total_parameters(*sizes)), "got a str"),
    (lambda *sizes: True, "got a bool"),
])
def test_a_fractional_or_odd_count_fails_cleanly(run_check, fn, shown):
    ok, out = run_check("count_parameters", fn)
    assert ok is False and shown in out


def test_a_slightly_wrong_rate_fails(run_check):
    """The rates are around 1e-3 to 1e-7: an absolute tolerance would let anything pass."""
    ok, out = run_check("transformer_lr", lambda s, d, w: 1.01 * transformer_lr(s, d, w))
    assert ok is False and "wrong value" in out
    ok, out = run_check("transformer_lr", lambda s, d, w: 0.0)
    assert ok is False


def test_learning_rate_peak_is_at_warmup():
    rates = [transformer_lr(s, 64, 200) for s in range(1, 1001)]
    assert rates.index(max(rates)) + 1 == 200
    assert max(rates) == pytest.approx(1 / math.sqrt(64 * 200))


# --------------------------------------------------------------------------------------------
# The references written in helpers/exercises agree with helpers/ and with worked examples
# --------------------------------------------------------------------------------------------

def test_masked_softmax_matches_the_attention_weights():
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 3)
    mask = torch.rand(2, 4, 5) < 0.5
    mask[0, 1] = False  # a fully masked row
    _, weights = lookup("scaled_dot_product_attention").reference(q, k, v, mask)
    mine = masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(8), mask)
    assert torch.allclose(mine, weights, atol=1e-6)
    assert torch.all(mine[0, 1] == 0)


def test_pe_rotation_moves_every_position_by_k():
    d_model, k = 16, 3
    pe = sinusoidal_encoding(40, d_model).double()
    M = pe_rotation(k, d_model).double()
    assert torch.allclose(pe[k:], pe[:-k] @ M.T, atol=1e-5)  # PE[p + k] = M @ PE[p]
    assert torch.allclose(pe_rotation(-k, d_model), M.T.float(), atol=1e-6)


def test_add_positional_encoding_matches_the_module():
    x = torch.randn(2, 7, 8)
    expected = PositionalEncoding(d_model=8, max_len=20)(x)
    assert torch.allclose(add_positional_encoding(x, sinusoidal_encoding(20, 8)), expected)


def test_feed_forward_matches_the_module():
    module = FeedForward(d_model=6, d_ff=10)
    x = torch.randn(2, 3, 6)
    mine = feed_forward(x, module.linear1.weight.T, module.linear1.bias,
                        module.linear2.weight.T, module.linear2.bias)
    assert torch.allclose(mine, module(x), atol=1e-6)


def test_embed_tokens_matches_the_model():
    """The reference is what Transformer does before its encoder (dropout 0)."""
    model = Transformer(12, 12, d_model=16, num_heads=4, num_layers=1, d_ff=32, dropout=0.0,
                        max_len=20).eval()
    tokens = torch.randint(0, 12, (2, 7))
    expected = model.positional(model.src_embed(tokens) * math.sqrt(16))
    got = embed_tokens(tokens, model.src_embed.weight, sinusoidal_encoding(20, 16))
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_sublayer_twice_is_an_encoder_layer(norm_first):
    layer = EncoderLayer(16, 4, 32, dropout=0.0, norm_first=norm_first).eval()
    with torch.no_grad():
        layer.norm1.weight.uniform_(0.5, 1.5)
        layer.norm2.bias.uniform_(-0.5, 0.5)
    x = torch.randn(2, 5, 16)
    attention = lambda y: layer.self_attn(y, y, y)
    h = residual_sublayer(x, attention, layer.norm1, norm_first)
    y = residual_sublayer(h, layer.feed_forward, layer.norm2, norm_first)
    torch.testing.assert_close(y, layer(x))


def test_residual_sublayer_accepts_the_notebooks_modules():
    x = torch.randn(1, 2, 6)
    ff, norm = FeedForward(6, 12), LayerNorm(6)
    torch.testing.assert_close(residual_sublayer(x, ff, norm, True), x + ff(norm(x)))


def test_shift_right_puts_bos_first_and_keeps_the_length():
    target = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]])
    got = shift_right(target, bos_id=1)
    assert got.tolist() == [[1, 5, 6, 7], [1, 8, 2, 0]]
    assert got.dtype == target.dtype and torch.equal(target[:, 0], torch.tensor([5, 8]))


def test_cross_attention_is_one_head_of_multi_head_attention():
    """With one head and no biases, MultiHeadAttention(x, memory, memory) is the reference
    followed by W_O."""
    mha = MultiHeadAttention(8, 1, bias=False)
    x, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    mask = padding_mask(torch.tensor([[4, 5, 6, 7, 8], [4, 5, 6, 0, 0]]), pad_id=0)  # (B,1,1,S)
    expected = mha(x, memory, memory, mask)
    out, weights = cross_attention(x, memory, mha.w_q.weight.T, mha.w_k.weight.T,
                                   mha.w_v.weight.T, mask[:, 0])  # (B, 1, S) for one head
    torch.testing.assert_close(mha.w_o(out), expected)
    torch.testing.assert_close(weights, mha.attention_weights[:, 0])
    assert weights.shape == (2, 3, 5) and torch.all(weights[1, :, 3:] == 0)


def test_output_projection_is_the_tied_generator():
    model = Transformer(10, 13, d_model=16, num_heads=4, num_layers=1, d_ff=32, tie_weights=True)
    with torch.no_grad():
        model.generator.bias.uniform_(-1, 1)
    x = torch.randn(2, 5, 16)
    got = output_projection(x, model.tgt_embed.weight, model.generator.bias)
    torch.testing.assert_close(got, model.generator(x))


def test_label_smoothed_nll_equals_f_cross_entropy_on_every_case():
    for case in lookup("label_smoothed_nll").cases():
        torch.testing.assert_close(case.run(label_smoothed_nll), case.run(my_label_smoothed_nll))


def test_beam_step_by_hand():
    """Two hypotheses, three tokens (EOS = 2): the candidates by hand, best first."""
    sums = torch.tensor([-1.0, -0.5])
    log_probs = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]))
    lp = log_probs.tolist()
    # best first: row 1 + EOS -0.72, row 0 + 0 -1.69, row 0 + 1 -2.20, row 0 + EOS -2.61, ...
    ended, kept = beam_step(sums, log_probs, 2, eos_id=2)
    assert [(r, t) for r, t, _ in ended] == [(1, 2)]
    assert [(r, t) for r, t, _ in kept] == [(0, 0), (0, 1)]  # the beam is still full
    assert [s for *_, s in kept] == pytest.approx([-1.0 + lp[0][0], -1.0 + lp[0][1]])
    ended, kept = beam_step(sums, log_probs, 1, eos_id=2)  # width 1: EOS is the best
    assert [(r, t) for r, t, _ in ended] == [(1, 2)] and [(r, t) for r, t, _ in kept] == [(0, 0)]
    ended, kept = beam_step(sums, log_probs, 2, eos_id=2, last_step=True)
    assert [(r, t) for r, t, _ in ended] == [(1, 2), (0, 0)] and kept == []


def test_beam_step_first_step_is_a_plain_topk():
    log_probs = torch.randn(1, 11).log_softmax(-1)
    log_probs[0, 2] = -30.0  # EOS (id 2) out of reach
    ended, kept = beam_step(torch.zeros(1), log_probs, 4, 2)
    top = log_probs[0].topk(4)
    assert ended == [] and [r for r, _, _ in kept] == [0] * 4
    assert [t for _, t, _ in kept] == top.indices.tolist()
    assert [s for *_, s in kept] == pytest.approx(top.values.tolist())


def test_beam_step_cases_show_what_their_labels_say():
    cases = {case.label.split(";")[0]: case for case in lookup("beam_step").cases()}
    ended, _, kept, _ = cases["an <eos> among the 2 best: it ends, 2 others are kept"].run(
        beam_step)
    assert ended.tolist() == [[0, 2]] and len(kept) == 2
    ended, _, kept, _ = cases["an <eos> ranked third, with beam_size 2"].run(beam_step)
    sums, log_probs, *_ = cases["an <eos> ranked third, with beam_size 2"].args
    third = (sums[:, None] + log_probs).flatten().topk(3).indices[2].item()
    assert divmod(third, 5)[1] == 2 and len(ended) == 0 and len(kept) == 2
    ended, _, kept, _ = cases["the last step: the 3 best all end, whatever their token"].run(
        beam_step)
    assert len(ended) == 3 and (ended[:, 1] != 2).any() and len(kept) == 0
