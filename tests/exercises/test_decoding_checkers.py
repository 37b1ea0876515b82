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


def cached_layer_with_einsum(layer, x, memory, memory_mask, cache, i):
    """Correct, written differently: einsum attention over explicit heads, pre-built masks."""
    def attend(attn, y, k, v, mask):
        h, d_k = attn.num_heads, attn.d_k
        q = attn.w_q(y).unflatten(-1, (h, d_k))  # (B, T, h, d_k)
        scores = torch.einsum("bthd,bhsd->bhts", q, k) / d_k ** 0.5
        scores = scores.masked_fill(~mask, float("-inf"))
        return attn.w_o(torch.einsum("bhts,bhsd->bthd", scores.softmax(-1), v).flatten(-2))

    def kv(attn, y):
        return tuple(w(y).unflatten(-1, (attn.num_heads, attn.d_k)).transpose(1, 2)
                     for w in (attn.w_k, attn.w_v))

    k, v = kv(layer.self_attn, x)
    if cache.self_kv[i] is not None:
        k, v = (torch.cat([old, new], dim=2)
                for old, new in zip(cache.self_kv[i], (k, v), strict=True))
    cache.self_kv[i] = (k, v)
    t, T = k.shape[2], x.shape[1]
    causal = torch.ones(t, t, dtype=torch.bool).tril()[t - T:]  # the new rows
    x = layer.norm1(x + attend(layer.self_attn, x, k, v, causal))
    if cache.cross_kv[i] is None:
        cache.cross_kv[i] = kv(layer.cross_attn, memory)
    x = layer.norm2(x + attend(layer.cross_attn, x, *cache.cross_kv[i], memory_mask))
    return layer.norm3(x + layer.feed_forward(x))


def test_kv_cache_reference_and_an_einsum_answer_pass(run_check):
    from helpers.decoding import cached_decoder_layer

    for fn in (cached_decoder_layer, cached_layer_with_einsum):
        ok, out = run_check("kv_cache_decode", fn)
        assert ok is True, out


def test_cached_logits_equal_the_uncached_decoder():
    exercise = engine.lookup("kv_cache_decode")
    for case in exercise.cases():
        model, src, tokens, src_mask = case.args
        with torch.no_grad():
            uncached = model.decode(tokens, model.encode(src, src_mask), src_mask)
        torch.testing.assert_close(case.run(exercise.reference), uncached, atol=1e-5, rtol=1e-4)


def test_beam_search_reference_and_an_uncached_answer_pass(run_check):
    from helpers.decoding import beam_search
    from helpers.exercises.nb10_variants import beam_with

    for fn in (beam_search, beam_with()):  # with a KV cache and early stop; without either
        ok, out = run_check("beam_search", fn)
        assert ok is True, out


def test_every_beam_bug_changes_some_case():
    exercise = engine.lookup("beam_search")
    for pitfall in exercise.pitfalls:
        changed = []
        for case in exercise.cases():
            ref, bug = case.run(exercise.reference), case.run(pitfall.variant)
            changed.append(ref[0].shape != bug[0].shape or not torch.equal(ref[0], bug[0]))
        assert any(changed), pitfall.name


def beam_search_from_the_exercise_text(model, src, beam_size, max_len, bos_id, eos_id,
                                       src_mask=None, length_penalty=0.0, count_eos=True):
    """Correct, as notebook 10's exercise describes it: beam_step at each step, hypotheses as
    Python lists, no KV cache, no early stop (``count_eos=False``: the length of a finished
    hypothesis leaves its EOS out, against the exercise's rule)."""
    from helpers.decoding import beam_step

    model.eval()
    beam, finished = [([], 0.0)], []
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        for t in range(1, max_len + 1):
            prefixes = torch.tensor([[bos_id, *tokens] for tokens, _ in beam])
            logits = model.decode(prefixes, memory.expand(len(beam), -1, -1), src_mask)
            sums = torch.tensor([s for _, s in beam])
            ended, kept = beam_step(sums, logits[:, -1].log_softmax(-1), beam_size, eos_id,
                                    last_step=t == max_len)
            for row, token, s in ended:
                length = t if count_eos or token != eos_id else max(t - 1, 1)
                finished.append((beam[row][0] + [token], s / length ** length_penalty))
            beam = [(beam[row][0] + [token], s) for row, token, s in kept]
            if not beam:
                break
    return sorted(finished, key=lambda pair: -pair[1])[:beam_size]


def test_beam_search_written_from_the_exercise_text_passes(run_check):
    ok, out = run_check("beam_search", beam_search_from_the_exercise_text)
    assert ok is True, out


def test_beam_search_whose_length_leaves_out_eos_fails(run_check):
    """The exercise says the length counts the <eos>; a search that does not count it fails."""
    def search(*args, **kwargs):
        return beam_search_from_the_exercise_text(*args, **kwargs, count_eos=False)

    ok, out = run_check("beam_search", search)
    assert ok is False and out.startswith("❌ beam_search: ")
