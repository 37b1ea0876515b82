"""Notebook 12's exercises, in the notebook's order: one pair's input and labels for translation
by continuation (``continuation_example``: T1, G5), the GPT's ``forward`` (``gpt``: G6, T2),
the sampling filter (``filter_logits``: G3, G4), the generation loop with the KV cache's prefill
(``generate_tokens``: G7, G8, D5, D6), RMSNorm (``rms_norm``: G1) and rotary positions
(``apply_rope``: G2).
"""

import math
from dataclasses import dataclass

import torch

from ..data import BOS_ID, EOS_ID, PAD_ID
from ..gpt import GPT, GPTConfig, continuation_example, filter_logits, generate_tokens
from ..masks import causal_mask
from ..modern import apply_rope, rms_norm, rope_angles
from .engine import Case, Exercise, ModuleCase, Pitfall, randn
from .nb12_generation import (
    HINT_D6,
    HINT_START,
    SEP_ID,
    VOCAB,
    generate_cases,
    generate_uncached,
    loop_with,
)

# ----------------------------------------------------------------------------------------------
# continuation_example: one pair's input and labels
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class IdsCase(Case):
    """A case whose answer is a tuple of id lists: each list becomes a ``torch.long`` tensor, so
    that ``check`` can compare it (tensors are left as they are)."""

    def run(self, fn):
        result = super().run(fn)
        if not isinstance(result, tuple):
            return result
        return tuple(torch.tensor(part, dtype=torch.long) if isinstance(part, list)
                     and all(isinstance(i, int) for i in part) else part for part in result)


def _example(prompt, answer):
    """:func:`helpers.gpt.continuation_example`, its lists as tensors."""
    return tuple(torch.tensor(part) for part in continuation_example(prompt, answer))


def _example_cases(g):
    def words(n, low):
        return (low + torch.randperm(20, generator=g)[:n]).tolist()

    return [IdsCase("4 English words, 4 French words + <eos>",
                    ([BOS_ID, *words(4, 5), SEP_ID], [*words(4, 30), EOS_ID])),
            IdsCase("1 English word, 1 French word + <eos>",
                    ([BOS_ID, *words(1, 5), SEP_ID], [*words(1, 30), EOS_ID])),
            IdsCase("2 English words, 5 French words + <eos>",
                    ([BOS_ID, *words(2, 5), SEP_ID], [*words(5, 30), EOS_ID]))]


def _prompt_scored(prompt, answer):  # G5
    sequence = prompt + answer
    return sequence[:-1], sequence[1:]


def _not_shifted(prompt, answer):  # T1: the label of position t is token t itself
    sequence = prompt + answer
    return sequence[:-1], [PAD_ID] * len(prompt) + answer[:-1]


def _first_word_unscored(prompt, answer):
    sequence = prompt + answer
    return sequence[:-1], [PAD_ID] * len(prompt) + answer[1:]


def _sep_scored(prompt, answer):
    sequence = prompt + answer
    return sequence[:-1], [PAD_ID] * (len(prompt) - 2) + [prompt[-1], *answer]


def _last_token_fed(prompt, answer):
    return prompt + answer, [PAD_ID] * (len(prompt) - 1) + answer


# ----------------------------------------------------------------------------------------------
# gpt: the learner's GPT.forward, with GPT's __init__ and weights
# ----------------------------------------------------------------------------------------------

def gpt_variant(mask=True, scale=True, positions=True, final_norm=True, given_mask=True):
    """A GPT whose forward has one bug: no default causal mask (G6), embeddings not scaled
    (T2), no positions, no final norm, or the mask it is given ignored."""
    def forward(self, tokens, attention_mask=None):
        x = self.embed(tokens) * (math.sqrt(self.config.d_model) if scale else 1.0)
        x = self.positional(x) if positions else x
        if attention_mask is None or not given_mask:
            attention_mask = causal_mask(tokens.shape[1])[None, None] if mask else None
        for block in self.blocks:
            x = block(x, attention_mask)
        return self.head(self.final_norm(x) if final_norm else x)
    return type("BuggyGPT", (GPT,), {"forward": forward})


def _gpt_cases(g):
    def case(label, length, changes=None, batch=2, padded=False):
        config = GPTConfig(d_model=16, num_heads=2, num_layers=2, d_ff=32, dropout=0.0,
                           max_len=10, **(changes or {}))
        tokens = torch.randint(5, VOCAB, (batch, length), generator=g)
        mask = None
        if padded:  # the last sequence ends two tokens early: causal and padding (B, 1, L, L)
            tokens[-1, -2:] = PAD_ID
            mask = causal_mask(length) & (tokens != PAD_ID)[:, None, None, :]
        return ModuleCase(label, (tokens, mask), weights_of=GPT,
                          init={"vocab_size": VOCAB, "config": config})

    return [case("pre-norm, 2 blocks, L=6, mask=None (causal)", 6),
            case("post-norm (norm_first=False), L=5, mask=None", 5, {"norm_first": False}),
            case("pre-norm, a causal and padding mask (B, 1, L, L) given", 6, padded=True),
            case("SwiGLU blocks, one sequence of length 1", 1, {"ffn": "swiglu"}, batch=1)]


# ----------------------------------------------------------------------------------------------
# filter_logits (temperature and top-p)
# ----------------------------------------------------------------------------------------------

def _top_p_then_temperature(logits, temperature, top_p):  # G3
    return filter_logits(logits, 1.0, top_p=top_p) / temperature


def _top_p_without_crossing(logits, temperature, top_p):  # G4: strictly below top_p only
    logits = logits / temperature
    ordered, index = logits.sort(dim=-1, descending=True)
    ordered = ordered.masked_fill(ordered.softmax(-1).cumsum(-1) > top_p, float("-inf"))
    return torch.empty_like(logits).scatter_(-1, index, ordered)


def _filter(logits, temperature, top_p):
    """``filter_logits`` with temperature and top-p only: the learner's signature."""
    return filter_logits(logits, temperature, top_p=top_p)


def _filter_cases(g):
    return [Case("8 tokens, temperature 0.5, top_p 0.9", (3 * randn(g, 2, 8), 0.5, 0.9)),
            Case("6 tokens, temperature 2, top_p 0.6", (2 * randn(g, 3, 6), 2.0, 0.6)),
            Case("one token of 0.6, top_p 0.5: the first token crosses",
                 (torch.tensor([[0.0, -1.0986, -1.0986, -10.0]]).log_softmax(-1), 1.0,
                  0.5)),
            Case("12 tokens, temperature 1, top_p 0.95", (randn(g, 1, 12), 1.0, 0.95))]


# ----------------------------------------------------------------------------------------------
# rms_norm and apply_rope: the modern block's parts
# ----------------------------------------------------------------------------------------------

def _rms_with_mean(x, weight, eps=1e-6):  # G1: LayerNorm's centring kept
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred / centred.pow(2).mean(dim=-1, keepdim=True).add(eps).sqrt() * weight


def _rope_halves(x, angles):  # G2: pairs (i, i + d/2), the "rotate half" layout
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    cos, sin = angles.cos(), angles.sin()
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


def _rms_cases(g):
    def gain(d):
        return 1 + 0.5 * randn(g, d)

    return [Case("random (2, 3, 8), mean 2", (2 + randn(g, 2, 3, 8), gain(8))),
            Case("d_model = 2", (randn(g, 4, 2), gain(2))),
            Case("eps = 0.1, small inputs", (0.2 * randn(g, 1, 5, 6), gain(6)), {"eps": 0.1}),
            Case("length 1", (3 * randn(g, 1, 1, 4), gain(4)))]


def _rope_cases(g):
    return [Case("(B=2, h=2, L=5, d_k=8)", (randn(g, 2, 2, 5, 8), rope_angles(5, 8))),
            Case("one vector, d_k = 4, position 7", (randn(g, 1, 4), rope_angles(8, 4)[7:])),
            Case("positions 3 to 8 (a KV cache's new tokens)",
                 (randn(g, 1, 6, 6), rope_angles(6, 6, start=3)))]


EXERCISES: dict[str, Exercise] = {
    "continuation_example": Exercise(
        reference=_example,
        make_cases=_example_cases,
        sources=(continuation_example,),
        outputs=("inputs", "labels"),
        pitfalls=(
            Pitfall("G5", "the prompt scored", _prompt_scored,
                    "your labels also ask the model to predict the English words and <sep>: "
                    "the loss must count the continuation only. The label of a position whose "
                    "next token is still the prompt's is PAD_ID, which the loss ignores."),
            Pitfall("T1", "labels not shifted", _not_shifted,
                    "the label of position t is the NEXT token, t + 1: without the shift the "
                    "model learns to copy the token it already reads."),
            Pitfall(None, "the first French word unscored", _first_word_unscored,
                    "the position of <sep> is the one that predicts the first French word: "
                    "its label is that word, not PAD_ID."),
            Pitfall(None, "<sep> predicted", _sep_scored,
                    "<sep> is part of the prompt, given to the model, not predicted: the "
                    "position before it gets PAD_ID."),
            Pitfall(None, "the last token fed", _last_token_fed,
                    "the last token (<eos>) is a label only: nothing comes after it to predict, "
                    "so the input is the sequence without its last token."),
        ),
    ),
    "gpt": Exercise(
        reference=GPT,
        make_cases=_gpt_cases,
        sources=(GPT.forward, GPT.embed_tokens),
        outputs=("logits",),
        pitfalls=(
            Pitfall("G6", "no causal mask by default", gpt_variant(mask=False),
                    "with mask=None every position attends to the tokens after it, the ones "
                    "it must predict: build the causal mask, causal_mask(L)[None, None] "
                    "(four axes, True = may attend), when none is given."),
            Pitfall("T2", "embeddings not scaled", gpt_variant(scale=False),
                    "multiply the embeddings by sqrt(d_model) before adding the positions, as "
                    "notebook 05's encoder does."),
            Pitfall(None, "no positions", gpt_variant(positions=False),
                    "add the positions: self.positional(x) adds the sinusoidal table (and "
                    "dropout). Without them attention cannot tell the order of the tokens."),
            Pitfall(None, "no final norm", gpt_variant(final_norm=False),
                    "a pre-norm stack ends with one more norm before the output layer: "
                    "self.head(self.final_norm(x)) (final_norm is nn.Identity in post-norm)."),
            Pitfall(None, "the given mask ignored", gpt_variant(given_mask=False),
                    "use the mask you are given (it also hides the padding); build the causal "
                    "one only when mask is None."),
        ),
    ),
    "filter_logits": Exercise(
        reference=_filter,
        make_cases=_filter_cases,
        sources=(filter_logits,),
        pitfalls=(
            Pitfall("G3", "top-p before the temperature", _top_p_then_temperature,
                    "divide by the temperature FIRST: the temperature reshapes the "
                    "distribution, and the nucleus (top-p) must be chosen on that new shape."),
            Pitfall("G4", "the crossing token dropped", _top_p_without_crossing,
                    "keep the token that crosses top_p: the nucleus is the smallest set of most "
                    "likely tokens whose probabilities reach top_p, so remove a token only when "
                    "the tokens ranked above it already reach top_p."),
        ),
    ),
    "generate_tokens": Exercise(
        reference=generate_uncached,
        make_cases=generate_cases,
        sources=(generate_tokens,),
        outputs=("tokens",),
        pitfalls=(
            Pitfall("D5", "the first position's logits", loop_with(position="first"),
                    "the next token comes from the last position's logits, logits[:, -1]: "
                    "after the prefill there is one row of logits per prompt token."),
            Pitfall("G7", "start always 0", loop_with(start="zero"), HINT_START),
            Pitfall("G7", "start one too far", loop_with(start="after"), HINT_START),
            Pitfall("G8", "no prefill", loop_with(prefill=False),
                    "the first call must feed the whole prompt (the prefill, start=0), so that "
                    "the cache holds the keys and values of every prompt token; then one token "
                    "per step."),
            Pitfall(None, "the whole sequence fed again", loop_with(refeed=True),
                    "after the prefill, feed only the newest token, out[:, -1:]: the cache "
                    "already holds the keys and values of the others, and fed again they would "
                    "be stored twice."),
            Pitfall("D6", "finished rows not kept at <eos>", loop_with(keep_eos=False), HINT_D6),
            Pitfall("D6", "stopped at the first <eos>", loop_with(stop="any"), HINT_D6),
            Pitfall(None, "max_len ignored", loop_with(limit=False),
                    "the sequence may not grow beyond model.config.max_len positions: at most "
                    "min(max_new, max_len - P) new tokens."),
            Pitfall(None, "the generator not passed on", loop_with(use_generator=False),
                    "pass generator=generator on to sample_next: the samples must come from "
                    "the generator you are given."),
        ),
    ),
    "rms_norm": Exercise(
        reference=rms_norm,
        make_cases=_rms_cases,
        sources=(rms_norm,),
        pitfalls=(
            Pitfall("G1", "the mean subtracted", _rms_with_mean,
                    "RMSNorm does NOT subtract the mean: that is LayerNorm's first step, which "
                    "RMSNorm drops. Divide x itself by sqrt(mean(x^2) + eps)."),
            Pitfall(None, "eps outside the root",
                    lambda x, w, eps=1e-6: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * w,
                    "eps goes inside the square root, as in notebook 04 (pitfall N2) and "
                    "torch.nn.RMSNorm: sqrt(mean(x^2) + eps)."),
            Pitfall(None, "statistics over the wrong axis",
                    lambda x, w, eps=1e-6: x / x.pow(2).mean(0, keepdim=True).add(eps).sqrt() * w,
                    "each vector is normalised over its own features: the mean of x^2 over the "
                    "LAST axis (dim=-1), as LayerNorm's statistics (pitfall N4)."),
        ),
    ),
    "apply_rope": Exercise(
        reference=apply_rope,
        make_cases=_rope_cases,
        sources=(apply_rope,),
        pitfalls=(
            Pitfall("G2", "halves instead of adjacent pairs", _rope_halves,
                    "you rotated the pairs (x[i], x[i + d/2]), the layout of some libraries "
                    "('rotate half'). It is a valid choice when queries and keys agree, but the "
                    "course pairs ADJACENT features (x[2i], x[2i+1]), as notebook 02 "
                    "interleaves sine and cosine: angle i belongs to that pair."),
            Pitfall(None, "rotated the other way",
                    lambda x, a: apply_rope(x, -a),
                    "the rotation goes the other way: (x0, x1) -> (x0 cos - x1 sin, "
                    "x0 sin + x1 cos), a turn by +angle."),
        ),
    ),
}
