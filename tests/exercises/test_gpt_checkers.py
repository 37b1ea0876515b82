"""Notebook 12's checkers of the GPT itself (continuation_example, gpt, generate_tokens): answers
written independently of the references pass, in lists or tensors, and buggy answers written
another way get the hint of their pitfall."""

import torch
import torch.nn.functional as F
from torch import nn

from helpers.data import EOS_ID, PAD_ID
from helpers.attention import KVCache
from helpers.generation import sample_next
from helpers.gpt import Block
from helpers.layers import LayerNorm, layer_stack
from helpers.positional import PositionalEncoding

# ---- continuation_example ------------------------------------------------------------------


def example_by_positions(prompt, answer):
    """Position by position: the next token, or PAD_ID while it is the prompt's."""
    sequence = prompt + answer
    labels = [sequence[t + 1] if t + 1 >= len(prompt) else PAD_ID
              for t in range(len(sequence) - 1)]
    return sequence[:-1], labels


def example_as_tensors(prompt, answer):
    sequence = torch.tensor(prompt + answer)
    labels = sequence[1:].clone()
    labels[:len(prompt) - 1] = PAD_ID
    return sequence[:-1], labels


def example_unshifted(prompt, answer):  # T1: each position labelled with its own token
    inputs = (prompt + answer)[:-1]
    return inputs, [token if t >= len(prompt) else PAD_ID for t, token in enumerate(inputs)]


def example_prompt_scored(prompt, answer):  # G5: every next token, English included
    sequence = torch.tensor(prompt + answer)
    return sequence[:-1], sequence[1:]


def test_continuation_answers_written_differently_pass(run_check):
    for answer in (example_by_positions, example_as_tensors):
        passed, text = run_check("continuation_example", answer)
        assert passed, text


def test_continuation_mistakes_are_named(run_check):
    for answer, pitfall in ((example_unshifted, "[T1]"), (example_prompt_scored, "[G5]")):
        passed, text = run_check("continuation_example", answer)
        assert not passed and pitfall in text, text


# ---- gpt: the learner's forward with the notebook's __init__ -------------------------------

class NotebookGPT(nn.Module):
    """The __init__ notebook 12 gives (sinusoidal positions, LayerNorm)."""

    def __init__(self, vocab_size, config):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(vocab_size, config.d_model)
        self.positional = PositionalEncoding(config.d_model, config.max_len, config.dropout)
        self.blocks = layer_stack(lambda: Block(config), config.num_layers)
        self.final_norm = LayerNorm(config.d_model) if config.norm_first else nn.Identity()
        self.head = nn.Linear(config.d_model, vocab_size)
        self.head.weight = self.embed.weight


class FunctionalGPT(NotebookGPT):
    """The lines the KV cache adds written with the cache's length up front."""

    def forward(self, tokens, mask=None, cache=None):
        start, L = (cache.length if cache is not None else 0), tokens.shape[1]
        x = F.embedding(tokens, self.embed.weight) * self.config.d_model ** 0.5
        x = self.positional(x, start)
        if mask is None:
            mask = torch.ones(start + L, start + L, dtype=torch.bool).tril()[-L:].view(
                1, 1, L, start + L)
        for block in self.blocks:
            x = block(x, mask, cache)
        if cache is not None:
            cache.length = start + L
        return F.linear(self.final_norm(x), self.head.weight, self.head.bias)


class SeesTheFuture(NotebookGPT):  # G6: mask None passed on as it is
    def forward(self, tokens, mask=None):
        x = self.positional(self.embed(tokens) * self.config.d_model ** 0.5)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.final_norm(x))


class Unscaled(NotebookGPT):  # T2
    def forward(self, tokens, mask=None):
        L = tokens.shape[1]
        mask = torch.tril(torch.ones(1, 1, L, L, dtype=torch.bool)) if mask is None else mask
        x = self.positional(self.embed(tokens))
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.final_norm(x))


class CachedAtPositionZero(NotebookGPT):  # G7: the new tokens' positions from 0 again
    def forward(self, tokens, mask=None, cache=None):
        start, L = (0 if cache is None else cache.length), tokens.shape[1]
        x = self.positional(self.embed(tokens) * self.config.d_model ** 0.5)  # start forgotten
        if mask is None:
            mask = torch.ones(start + L, start + L, dtype=torch.bool).tril()[None, None, start:]
        for block in self.blocks:
            x = block(x, mask, cache)
        if cache is not None:
            cache.length += L
        return self.head(self.final_norm(x))


class CacheNeverAdvanced(FunctionalGPT):  # G7: cache.length stays 0, so every step is at 0
    def forward(self, tokens, mask=None, cache=None):
        length = None if cache is None else cache.length
        logits = super().forward(tokens, mask, cache)
        if cache is not None:
            cache.length = length
        return logits


def test_a_gpt_written_differently_passes(run_check):
    passed, text = run_check("gpt", FunctionalGPT)
    assert passed, text


def test_gpt_mistakes_are_named(run_check):
    for answer, pitfall in ((SeesTheFuture, "[G6]"), (Unscaled, "[T2]"),
                            (CachedAtPositionZero, "[G7]"), (CacheNeverAdvanced, "[G7]")):
        passed, text = run_check("gpt", answer)
        assert not passed and pitfall in text, text


def test_an_untouched_gpt_is_not_attempted(run_check):
    class Untouched(NotebookGPT):
        def forward(self, tokens, mask=None, cache=None):
            raise NotImplementedError  # your code here

    passed, text = run_check("gpt", Untouched)
    assert not passed and "not attempted yet" in text


# ---- generate_tokens: the loop with the prefill -------------------------------------------

def loop_with_while(model, prompt, max_new, temperature=0.0, generator=None):
    """The prefill, then a while loop that stops on its own conditions."""
    cache = KVCache()
    tokens, done, new = prompt, torch.zeros(len(prompt), dtype=torch.bool), 0
    logits = model(prompt, cache=cache)[:, -1]
    while new < max_new and tokens.shape[1] < model.config.max_len:
        token = sample_next(logits, temperature, generator=generator)
        token = torch.where(done, torch.full_like(token, EOS_ID), token)
        tokens, new = torch.cat([tokens, token[:, None]], 1), new + 1
        done = done | (token == EOS_ID)
        if done.all():
            break
        logits = model(token[:, None], cache=cache)[:, -1]
    return tokens


def loop_with_a_cache_per_step(model, prompt, max_new, temperature=0.0, generator=None):  # G7
    out, new = prompt, prompt
    finished = torch.zeros(len(prompt), dtype=torch.bool)
    for _ in range(min(max_new, model.config.max_len - prompt.shape[1])):
        cache = KVCache()  # "the cache of this step"
        token = sample_next(model(new, cache=cache)[:, -1], temperature,
                            generator=generator).masked_fill(finished, EOS_ID)
        out, new = torch.cat([out, token[:, None]], 1), token[:, None]
        finished |= token == EOS_ID
        if finished.all():
            break
    return out


def loop_without_prefill(model, prompt, max_new, temperature=0.0, generator=None):  # G8
    cache, out = KVCache(), prompt
    finished = torch.zeros(len(prompt), dtype=torch.bool)
    for _ in range(min(max_new, model.config.max_len - prompt.shape[1])):
        logits = model(out[:, -1:], cache=cache)
        token = sample_next(logits[:, -1], temperature, generator=generator)
        token = token.masked_fill(finished, EOS_ID)
        out = torch.cat([out, token[:, None]], 1)
        finished |= token == EOS_ID
        if finished.all():
            break
    return out


def test_a_loop_written_differently_passes(run_check):
    passed, text = run_check("generate_tokens", loop_with_while)
    assert passed, text


def test_loop_mistakes_are_named(run_check):
    for answer, pitfall in ((loop_with_a_cache_per_step, "[G7]"), (loop_without_prefill, "[G8]")):
        passed, text = run_check("generate_tokens", answer)
        assert not passed and pitfall in text, text


def test_the_reference_loop_gives_the_same_tokens_with_and_without_the_cache():
    """The checker's reference is the cached loop: its tokens are those of the loop WITHOUT the
    cache (which the checker refuses, G10, for its calls of the model)."""
    from helpers.exercises.engine import lookup
    from helpers.exercises.nb12 import generate_uncached

    exercise = lookup("generate_tokens")
    for case in exercise.cases():
        cached, calls = case.run(exercise.reference)
        uncached, _ = case.run(generate_uncached)
        assert torch.equal(cached, uncached), case.label
        assert calls[0, 1] == 0 and (calls[1:, 0] == 1).all(), case.label  # prefill, then one
