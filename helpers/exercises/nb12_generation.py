"""Notebook 12's generation exercise, ``generate_tokens`` (the loop with the KV cache's prefill:
G7, G8, G9, D5, D6): its cases, tiny GPTs continuing prompts, and the buggy loops its checker
knows. Its :class:`~helpers.exercises.engine.Exercise` is in ``nb12.py``.

A case returns two things: the tokens, and the model's calls, ``(tokens fed, start)`` of each,
read where every pass through the model starts (``model.embed_tokens``, which ``cached_forward``
and ``GPT.forward`` both call). So a loop whose tokens are right but that does not use the cache
as the text asks (the prompt fed one token at a time, or the whole sequence recomputed at every
step) is refused, and named.
"""

from dataclasses import dataclass, field

import torch

from ..data import BOS_ID, EOS_ID
from ..gpt import GPT, GPTConfig, cached_forward, generate_tokens, sample_next
from .engine import Case

VOCAB = 12  # the checkers' tiny models: 12 token ids
SEP_ID = 4  # where joint_vocab puts <sep>: right after the four special tokens


@dataclass(frozen=True)
class GenerateCase(Case):
    """The learner's loop on a tiny GPT (weights from ``seed``, ``<eos>`` made likelier by
    ``eos_bias`` so that rows end at different steps) with a fresh generator seeded with
    ``sample_seed``. The global random state is untouched."""

    config: GPTConfig = field(default_factory=GPTConfig)
    seed: int = 0
    eos_bias: float = 0.0
    sample_seed: int = 0

    def run(self, fn):
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(self.seed)
            model = GPT(VOCAB, self.config).eval()
            # an output layer of its own: a random model with tied embeddings mostly repeats
            # the token it reads, which would hide most mistakes
            model.head.weight = torch.nn.Parameter(torch.randn(VOCAB, self.config.d_model))
            model.head.bias[EOS_ID] += self.eos_bias
            generator = torch.Generator().manual_seed(self.sample_seed)
            calls = []
            embed = model.embed_tokens

            def recorded(tokens, start=0):  # every pass through the model starts here
                calls.append((int(tokens.shape[1]), int(start)))
                return embed(tokens, start)

            model.embed_tokens = recorded
            tokens = fn(model, *self.args, **{**self.kwargs, "generator": generator})
        if not torch.is_tensor(tokens) or tokens.dim() != 2:
            return tokens  # for the usual messages about what was returned
        # the calls that made the new tokens (one more, after the last token, is harmless)
        made = max(tokens.shape[1] - self.args[0].shape[1], 0)
        calls = (calls + [(-1, -1)] * made)[:made]  # (-1, -1): no call for that token
        return tokens, torch.tensor(calls, dtype=torch.long).reshape(made, 2)


def generate_uncached(model, prompt, max_new, temperature=0.0, generator=None):
    """:func:`helpers.gpt.generate_tokens` WITHOUT the cache: the tokens the cached loop must
    give (a slip: it runs the whole sequence through the model at every step)."""
    return generate_tokens(model, prompt, max_new, temperature, generator=generator,
                           use_cache=False)


def generate_cached(model, prompt, max_new, temperature=0.0, generator=None):
    """:func:`helpers.gpt.generate_tokens` with the cache, in the learner's signature: the
    reference, whose tokens are those of :func:`generate_uncached` (a test checks it)."""
    return generate_tokens(model, prompt, max_new, temperature, generator=generator)


def generate_cases(g):
    def prompts(batch, length):
        words = torch.randint(5, VOCAB, (batch, length - 2), generator=g)
        ends = torch.tensor([[BOS_ID], [SEP_ID]]).expand(2, batch).T
        return torch.cat([ends[:, :1], words, ends[:, 1:]], dim=1)  # <bos> words <sep>

    def config(**changes):
        return GPTConfig(**{"d_model": 16, "num_heads": 2, "num_layers": 2, "d_ff": 32,
                            "dropout": 0.0, "max_len": 16, **changes})

    return [
        GenerateCase("greedy, 3 prompts of 5 tokens, max_new=6", (prompts(3, 5), 6),
                     config=config(), seed=3, eos_bias=1.5),
        GenerateCase("greedy, rotary positions, until every row has <eos>", (prompts(3, 4), 10),
                     config=config(positions="rope"), seed=1),
        GenerateCase("sampled at temperature 1 (seeded generator), 4 prompts",
                     (prompts(4, 4), 6), {"temperature": 1.0}, config=config(), seed=2,
                     eos_bias=1.0, sample_seed=3),
        GenerateCase("post-norm, max_len=9 reached by a prompt of 5", (prompts(2, 5), 8),
                     config=config(norm_first=False, max_len=9), seed=4, eos_bias=2.0),
    ]


def loop_with(position="last", start="right", prefill="whole", refeed=False, keep_eos=True,
              stop="all", limit=True, use_generator=True):
    """The reference loop with one thing wrong: the logits of the first position (D5), the
    new token's ``start`` at 0, one too far or too early, or counting the new tokens only
    (G7), no prefill (G8) or a prefill one token at a time (G9), the whole sequence fed again
    with the cache, finished rows not kept at ``<eos>`` or the loop stopped at the first one
    (D6), ``max_len`` ignored, the generator not passed on."""
    def loop(model, prompt, max_new, temperature=0.0, generator=None):
        out, cache = prompt, [None] * len(model.blocks)
        finished = torch.zeros(len(prompt), dtype=torch.bool)
        steps = min(max_new, model.config.max_len - prompt.shape[1]) if limit else max_new
        for _ in range(steps):
            if cache[0] is None and prefill == "one by one":  # G9: P calls of one token
                for t in range(out.shape[1]):
                    logits = cached_forward(model, out[:, t:t + 1], cache, t)
            else:
                if refeed:
                    new, at = out, 0
                elif cache[0] is None:
                    new, at = (out, 0) if prefill == "whole" else (out[:, -1:], out.shape[1] - 1)
                else:
                    new, at = out[:, -1:], out.shape[1] - 1
                    at = {"right": at, "zero": 0, "after": at + 1, "before": at - 1,
                          "new only": at - prompt.shape[1] + 1,
                          "new before": at - prompt.shape[1]}[start]
                logits = cached_forward(model, new, cache, at)
            logits = logits[:, -1] if position == "last" else logits[:, 0]
            next_token = sample_next(logits, temperature,
                                     generator=generator if use_generator else None)
            if keep_eos:
                next_token = next_token.masked_fill(finished, EOS_ID)
            out = torch.cat([out, next_token[:, None]], dim=1)
            finished |= next_token == EOS_ID
            if (finished.all() if stop == "all" else finished.any()):
                break
        return out
    return loop


HINT_START = ("a new token sits at position t, the number of tokens before it: pass "
              "start = out.shape[1] - 1 for the newest token (0 for the prefill), so that its "
              "positional encoding and its row of the causal mask are the right ones.")
HINT_START_OFF = ("the newest token's start is one off: it sits at position out.shape[1] - 1 "
                  "(the tokens before it, prompt included), not out.shape[1] or "
                  "out.shape[1] - 2. The last column of the calls shows the starts you passed.")
HINT_START_NEW = ("your start counts only the new tokens and forgets the prompt's P tokens: "
                  "the newest token sits at position out.shape[1] - 1, which counts the prompt "
                  "too (the cache already holds P + ... positions).")
HINT_D6 = ("once a row has written <eos>, every later token of that row is <eos> (sample_next "
            "still runs for it: replace its token), and the loop stops when EVERY row has "
            "written <eos>.")
