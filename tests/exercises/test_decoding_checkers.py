"""Notebook 10's checkers: the references pass (with and without a KV cache), answers written
differently pass, the cases show what their labels say, and every slip changes some case."""

import math

import torch

from helpers.attention import KVCache, MultiHeadAttention
from helpers.decoding import beam_search, beam_step, greedy_decode
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


def test_greedy_with_and_without_cache_and_another_answer_pass(run_check):
    def uncached(*args, **kwargs):
        return greedy_decode(*args, **kwargs, use_cache=False)

    for fn in (greedy_decode, uncached, greedy_row_by_row):
        ok, out = run_check("greedy_decode", fn)
        assert ok is True, out


def test_the_greedy_cases_end_at_different_steps_and_one_never_ends():
    exercise = engine.lookup("greedy_decode")
    for case in exercise.cases()[:3]:
        out = case.run(exercise.reference)
        ends = [(row == 2).nonzero()[0].item() if (row == 2).any() else None for row in out]
        assert len(set(ends)) > 1 or ends == [None] * len(ends)
    assert exercise.cases()[2].run(exercise.reference).shape[1] == 1 + 8  # cut at max_len


def test_the_model_is_the_same_on_every_check():
    first = engine.lookup("greedy_decode").cases()[0].args[0].state_dict()
    second = engine.lookup("greedy_decode").cases()[0].args[0].state_dict()
    assert all(torch.equal(first[k], second[k]) for k in first)


class EinsumCachedAttention(MultiHeadAttention):
    """Correct, written differently: einsum over explicit heads, the cache read and written by
    hand (the cross-attention's entry is the memory's, reused as it is)."""

    def forward(self, query, key, value, mask=None, cache=None):
        def heads(x):
            return x.unflatten(-1, (self.num_heads, self.d_k))  # (B, L, h, d_k)

        stored = cache.kv.get(self) if cache is not None else None
        if stored is not None and self.cross:
            k, v = stored
        else:
            k, v = (heads(w(x)).transpose(1, 2) for w, x in ((self.w_k, key), (self.w_v, value)))
            if stored is not None:
                k, v = torch.cat([stored[0], k], 2), torch.cat([stored[1], v], 2)
        if cache is not None:
            cache.kv[self] = (k, v)
        scores = torch.einsum("bthd,bhsd->bhts", heads(self.w_q(query)), k) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return self.w_o(torch.einsum("bhts,bhsd->bthd", scores.softmax(-1), v).flatten(-2))


def test_kv_cache_reference_and_an_einsum_answer_pass(run_check):
    for cls in (MultiHeadAttention, EinsumCachedAttention):
        ok, out = run_check("kv_cache_decode", cls)
        assert ok is True, out


def test_cached_logits_equal_the_uncached_decoder_and_the_model_is_left_as_it_was():
    exercise = engine.lookup("kv_cache_decode")
    for case in exercise.cases():
        model, src, tokens, src_mask = case.args
        with torch.no_grad():
            uncached = model.decode(tokens, model.encode(src, src_mask), src_mask)
        torch.testing.assert_close(case.run(exercise.reference), uncached, atol=1e-5, rtol=1e-4)
        engine._call(exercise.pitfalls[0].variant, case)  # a slip goes into a copy of the model
        assert all(type(m) is MultiHeadAttention for m in model.modules()
                   if isinstance(m, MultiHeadAttention))


def test_kv_cache_takes_a_subclass_of_the_notebooks_copy_of_the_class(run_check):
    """Notebook 10 runs MultiHeadAttention's reference cell, which defines a copy of the class:
    a learner's class that subclasses that copy is checked like any other."""
    import inspect

    import helpers.attention

    namespace = dict(vars(helpers.attention))
    exec(inspect.getsource(MultiHeadAttention), namespace)  # as the notebook's cell does
    assert namespace["MultiHeadAttention"] is not MultiHeadAttention
    learner = type("MyCachedAttention", (namespace["MultiHeadAttention"],), {})
    ok, out = run_check("kv_cache_decode", learner)
    assert ok is True, out


def test_kv_cache_check_refuses_a_function_clearly(run_check):
    ok, out = run_check("kv_cache_decode", lambda query, key, value, mask=None, cache=None: query)
    assert ok is False and "a subclass of MultiHeadAttention" in out


def beam_search_from_the_exercise_text(model, src, beam_size, max_len, bos_id, eos_id,
                                       src_mask=None, length_penalty=0.0, count_eos=True):
    """Correct, as notebook 10's exercise describes it: beam_step at each step, hypotheses as
    Python lists, no KV cache, no early stop (``count_eos=False``: the length of a finished
    hypothesis leaves its EOS out, against the exercise's rule)."""
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


def test_beam_search_with_its_cache_and_from_the_exercise_text_pass(run_check):
    for fn in (beam_search, beam_search_from_the_exercise_text):
        ok, out = run_check("beam_search", fn)
        assert ok is True, out


def test_beam_search_whose_length_leaves_out_eos_fails(run_check):
    """The exercise says the length counts the <eos>; a search that does not count it fails."""
    def search(*args, **kwargs):
        return beam_search_from_the_exercise_text(*args, **kwargs, count_eos=False)

    ok, out = run_check("beam_search", search)
    assert ok is False and out.startswith("❌ beam_search: ")


def test_every_beam_search_slip_changes_some_case():
    exercise = engine.lookup("beam_search")
    for pitfall in exercise.pitfalls:
        changed = []
        for case in exercise.cases():
            ref, bug = engine._call(exercise.reference, case), engine._call(pitfall.variant, case)
            changed.append(not isinstance(bug, tuple) or ref[0].shape != bug[0].shape
                           or not torch.equal(ref[0], bug[0]) or not torch.allclose(ref[1], bug[1]))
        assert any(changed), pitfall.name


def test_stopping_at_the_first_ending_loses_a_hypothesis():
    """D3 changes a result: a hypothesis that ends first need not be among the best at the end."""
    exercise = engine.lookup("beam_search")
    d3 = next(p for p in exercise.pitfalls if p.id == "D3")
    case = exercise.cases()[0]
    assert len(case.run(d3.variant)[1]) < len(case.run(exercise.reference)[1])


def test_a_kv_cache_slip_is_the_reference_with_one_edit():
    """The slips are stated as edits of MultiHeadAttention.forward, so they follow it."""
    for pitfall in engine.lookup("kv_cache_decode").pitfalls:
        assert issubclass(pitfall.variant, MultiHeadAttention)
        assert pitfall.variant.forward is not MultiHeadAttention.forward
    assert KVCache().kv == {}
