"""Notebook 12's exercises, in the notebook's order: one pair's input and labels for translation
by continuation (``continuation_example``: T1, G5), the GPT's ``forward`` (``gpt``: G6, T2),
the sampling filter (``filter_logits``: G3, G4), the generation loop with the KV cache's prefill
(``generate_tokens``: G7-G10, D5, D6), RMSNorm (``rms_norm``: G1) and rotary positions
(``apply_rope``: G2). Each exercise also names the other slips a learner is likely to make
(hints without an id); tests/exercises/test_slips_nb11_13.py writes them as a learner would.
"""

import math
from dataclasses import dataclass

import torch
from torch import nn

from ..data import BOS_ID, EOS_ID, PAD_ID
from ..gpt import GPT, GPTConfig, continuation_example, filter_logits, generate_tokens
from ..masks import causal_mask
from ..modern import apply_rope, rms_norm, rope_angles
from .engine import Case, Exercise, ModuleCase, Pitfall, randn
from .nb12_generation import (
    HINT_D6,
    HINT_START,
    HINT_START_NEW,
    HINT_START_OFF,
    SEP_ID,
    VOCAB,
    generate_cached,
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
        args = [list(arg) for arg in self.args]  # fresh copies, compared after the call
        result = fn(*args, **self.kwargs)
        for name, before, after in zip(("prompt", "answer"), self.args, args, strict=True):
            if before != after:
                raise _whole(ValueError(
                    f"your function changed its input list `{name}` in place (`prompt += "
                    "answer`, .extend or .append change the caller's list too): build a new "
                    "list, sequence = prompt + answer"))
        if not isinstance(result, tuple):
            return result
        return tuple(torch.tensor(part, dtype=torch.long) if isinstance(part, (list, tuple))
                     and all(isinstance(i, int) for i in part) else part for part in result)


def _whole(error: Exception) -> Exception:
    """``error``, marked to reach the learner whole (it says what to do)."""
    error.whole = True
    return error


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
                    ([BOS_ID, *words(2, 5), SEP_ID], [*words(5, 30), EOS_ID])),
            # joint_vocab gives a word both languages write the same way ("a") one id
            IdsCase("3 English words, 3 French words + <eos>, one id in both",
                    ([BOS_ID, 7, 31, 9, SEP_ID], [33, 31, 40, EOS_ID]))]


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


def _labels_are_inputs(prompt, answer):  # T1 (and G5): no shift, nothing masked
    sequence = prompt + answer
    return sequence[:-1], sequence[:-1]


def _pad_per_prompt_token(prompt, answer):  # T1: PAD_ID for each prompt token, then the answer
    return (prompt + answer)[:-1], [PAD_ID] * len(prompt) + answer


def _unshifted_eos_fed(prompt, answer):  # T1: the whole sequence in, each token its own label
    return prompt + answer, [PAD_ID] * len(prompt) + answer


def _shifted_back(prompt, answer):  # the inputs moved left instead of the labels
    sequence = prompt + answer
    return sequence[1:], [PAD_ID] * (len(prompt) - 1) + sequence[len(prompt) - 1:-1]


def _minus_100(prompt, answer):  # PyTorch's default ignore_index, not the course's PAD_ID
    return (prompt + answer)[:-1], [-100] * (len(prompt) - 1) + answer


def _eos_unscored(prompt, answer):  # the labels end before <eos>
    return (prompt + answer)[:-1], [PAD_ID] * (len(prompt) - 1) + answer[:-1]


def _eos_label_padded(prompt, answer):
    return (prompt + answer)[:-1], [PAD_ID] * (len(prompt) - 1) + answer[:-1] + [PAD_ID]


def _second_eos(prompt, answer):  # <eos> added, though the answer ends with it already
    sequence = prompt + answer + [EOS_ID]
    return sequence[:-1], [PAD_ID] * (len(prompt) - 1) + answer + [EOS_ID]


def _eos_dropped(prompt, answer):  # <eos> taken off the sequence, then its last token too
    sequence = prompt + answer[:-1]
    return sequence[:-1], [PAD_ID] * (len(prompt) - 1) + answer[:-1]


def _swapped(prompt, answer):
    inputs, labels = continuation_example(prompt, answer)
    return labels, inputs


def _answer_only(prompt, answer):  # no label for the prompt's positions
    return (prompt + answer)[:-1], list(answer)


def _eos_fed_label_padded(prompt, answer):
    return prompt + answer, [PAD_ID] * (len(prompt) - 1) + answer + [PAD_ID]


def _masked_by_token(in_prompt):
    """The prompt told apart by its ids (``t in prompt`` or ``t not in answer``), not by
    position: wrong where both languages share an id."""
    def variant(prompt, answer):
        sequence = prompt + answer
        if in_prompt:
            return sequence[:-1], [PAD_ID if t in prompt else t for t in sequence[1:]]
        return sequence[:-1], [t if t in answer else PAD_ID for t in sequence[1:]]
    return variant


def _prompt_extended(prompt, answer):  # prompt += answer: the caller's list grows
    prompt += answer
    return prompt[:-1], [PAD_ID] * (len(prompt) - len(answer) - 1) + answer


HINT_SHIFT = ("the label of position t is the NEXT token, t + 1: without the shift the model "
              "learns to copy the token it already reads. The labels are the sequence moved one "
              "step left, with PAD_ID at the len(prompt) - 1 positions whose next token is the "
              "prompt's.")
HINT_EOS_SCORED = ("<eos> is the last label: the position of the last French word must predict "
                   "it, which teaches the model to stop. labels = [PAD_ID] * (len(prompt) - 1) "
                   "+ answer, with answer's <eos> included.")
HINT_BY_POSITION = ("tell the prompt's positions apart by POSITION, not by token: a word both "
                    "languages write the same way (such as \"a\") is one id in the joint "
                    "vocabulary, so testing whether a token is in the prompt (or in the answer) "
                    "mislabels it. The first len(prompt) - 1 labels are PAD_ID.")


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


def _gpt_forward(embed="scaled", mask="causal", blocks="chained", final="once",
                 out="head", test="is None"):
    """A GPT forward with one slip, each argument naming where (its default: the right step)."""
    def forward(self, tokens, attention_mask=None):
        B, L = tokens.shape
        x, d = self.embed(tokens), self.config.d_model
        x = {"scaled": lambda: self.positional(x * math.sqrt(d)),
             "positions scaled too": lambda: self.positional(x) * math.sqrt(d),
             "times d_model": lambda: self.positional(x * d),
             "sqrt(d_k)": lambda: self.positional(x * math.sqrt(d // self.config.num_heads)),
             "divided": lambda: self.positional(x / math.sqrt(d))}[embed]()
        if attention_mask is None if test == "is None" else not attention_mask:
            attention_mask = {"causal": lambda: causal_mask(L)[None, None],
                              "inverted": lambda: ~causal_mask(L)[None, None],
                              "2-D": lambda: causal_mask(L),
                              "3-D": lambda: causal_mask(L)[None],
                              "float": lambda: causal_mask(L)[None, None].float(),
                              "batch length": lambda: causal_mask(B)[None, None]}[mask]()
        if final == "before":
            x = self.final_norm(x)
        h = self.blocks(x, attention_mask) if blocks == "called at once" else x
        for block in self.blocks if blocks != "called at once" else ():
            if blocks == "chained":
                h = block(h, attention_mask)
            elif blocks == "unchained":
                h = block(x, attention_mask)
            elif blocks == "residual added":
                h = h + block(h, attention_mask)
            h = self.final_norm(h) if final == "every block" else h
        x = h
        if final == "once":
            x = self.final_norm(x)
        if out == "embedding":
            return x @ self.embed.weight.T
        if out == "hidden":
            return x
        logits = self.head(x)
        return {"head": logits, "softmax": logits.softmax(-1),
                "log_softmax": logits.log_softmax(-1), "last": logits[:, -1]}[out]
    return type("BuggyGPT", (GPT,), {"forward": forward})


class _UntiedGPT(GPT):
    """A GPT whose output layer has a weight of its own (the tying line of __init__ dropped)."""

    def __init__(self, vocab_size, config):
        super().__init__(vocab_size, config)
        self.head.weight = nn.Parameter(self.embed.weight.detach().clone())


@dataclass(frozen=True)
class TiedCase(ModuleCase):
    """A :class:`ModuleCase` that also checks that the learner's __init__ keeps the output layer's
    weight tied to the embedding (loading the reference's weights would hide an untied copy)."""

    def run(self, cls):
        try:
            result = super().run(cls)
        except NotImplementedError as error:  # not a stub: torch's, for a module without forward
            if 'missing the required "forward" function' not in str(error):
                raise
            raise _whole(TypeError(
                "self.blocks is an nn.ModuleList, a list of blocks without a forward of its "
                "own: call each block in turn, for block in self.blocks: x = block(x, mask)")
                ) from None
        with torch.random.fork_rng(devices=[]):
            module = cls(**self.init)
        head, embed = getattr(module, "head", None), getattr(module, "embed", None)
        if head is not None and embed is not None and head.weight is not embed.weight:
            raise _whole(ValueError(
                "keep the __init__ the notebook gives: its line self.head.weight = "
                "self.embed.weight ties the output layer to the embedding (one matrix, as "
                "notebook 08's target embedding); your head has a weight of its own"))
        return result


def _gpt_cases(g):
    def case(label, length, changes=None, batch=2, padded=False):
        config = GPTConfig(d_model=16, num_heads=2, num_layers=2, d_ff=32, dropout=0.0,
                           max_len=10, **(changes or {}))
        tokens = torch.randint(5, VOCAB, (batch, length), generator=g)
        mask = None
        if padded:  # the last sequence ends two tokens early: causal and padding (B, 1, L, L)
            tokens[-1, -2:] = PAD_ID
            mask = causal_mask(length) & (tokens != PAD_ID)[:, None, None, :]
        return TiedCase(label, (tokens, mask), weights_of=GPT,
                        init={"vocab_size": VOCAB, "config": config})

    return [case("pre-norm, 2 blocks, L=6, mask=None (causal)", 6),
            case("post-norm (norm_first=False), L=5, mask=None", 5, {"norm_first": False}),
            case("pre-norm, a causal and padding mask (B, 1, L, L) given", 6, padded=True),
            case("SwiGLU blocks, one sequence of length 1", 1, {"ffn": "swiglu"}, batch=1)]


HINT_ROPE_SIGN = ("one sine has a minus, the other not: (x0, x1) -> (x0 cos - x1 sin, x0 sin + "
                  "x1 cos). With your signs the pair is not turned but stretched or mirrored.")
HINT_ROPE_BOTH = ("turn BOTH features of each pair: new_even = even cos - odd sin AND new_odd = "
                  "even sin + odd cos, both from the original pair.")
HINT_FOUR_AXES = ("the mask needs four axes, (1, 1, L, L), to broadcast over the batch and "
                  "the heads of the scores (B, h, L, L): causal_mask(L)[None, None].")


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


def _nucleus(keep="before < top_p", first=False, order="descending", fill=float("-inf"),
             back="scatter", temperature="first", probs_dim=-1, returned="logits", sum_dim=-1,
             assigned=True):
    """filter_logits with one slip: ``keep`` (which sorted tokens stay), ``first`` (the most
    likely token always kept), ``order`` of the sort, the ``fill`` of the dropped ones, how they
    go ``back`` in vocabulary order, the ``temperature`` step, the softmax's dimension
    ``probs_dim``, the running total's ``sum_dim``, what is ``returned``, and whether the
    masked result was ``assigned``."""
    def variant(logits, t, top_p):
        logits = {"first": logits / t, "multiplied": logits * t, "ignored": logits}[temperature]
        ordered, index = logits.sort(dim=-1, descending=order == "descending")
        if order == "none":
            ordered, index = logits, torch.arange(logits.shape[-1]).expand_as(logits)
        probs = ordered.softmax(dim=probs_dim)
        total = probs.cumsum(dim=sum_dim)
        kept = {"before < top_p": total - probs < top_p, "before <= top_p": total - probs <= top_p,
                "total < top_p": total < top_p, "total <= top_p": total <= top_p}[keep]
        if first:
            kept[..., 0] = True
        if returned == "probabilities":
            ordered = probs.masked_fill(~kept, 0.0)
        elif assigned:
            ordered = ordered.masked_fill(~kept, fill)
        if back == "none":
            out = ordered
        elif back == "gather":
            out = ordered.gather(-1, index)
        elif back == "mask only":
            out = logits.masked_fill(~kept, fill)
        else:
            out = torch.empty_like(logits).scatter_(-1, index, ordered)
        return {"logits": out, "probabilities": out, "renormalised": out.softmax(-1),
                "log_softmax": out.log_softmax(-1)}[returned]
    return variant


HINT_G4 = ("keep the token that crosses top_p: the nucleus is the smallest set of most likely "
           "tokens whose probabilities reach top_p, so remove a token only when the tokens "
           "ranked above it already reach top_p.")
HINT_LOGITS = ("return logits, not probabilities: the kept ones keep their values (divided by "
               "the temperature), the others become float('-inf'); sample_next applies the "
               "softmax itself.")
HINT_ROWS = ("each row is its own distribution: the softmax and the running total (cumsum) go "
             "over the last axis, dim=-1.")
HINT_BACK = ("put the kept logits back in VOCABULARY order: sorting moved each token, so scatter "
             "the sorted row back with the sort's indices, "
             "torch.empty_like(logits).scatter(-1, index, ordered); a token's logit must stay at "
             "its own id.")


def _filter(logits, temperature, top_p):
    """``filter_logits`` with temperature and top-p only: the learner's signature."""
    return filter_logits(logits, temperature, top_p=top_p)


def _filter_cases(g):
    return [Case("8 tokens, temperature 0.5, top_p 0.9", (3 * randn(g, 2, 8), 0.5, 0.9)),
            Case("6 tokens, temperature 2, top_p 0.6", (2 * randn(g, 3, 6), 2.0, 0.6)),
            Case("one token of 0.6, top_p 0.5: the first token crosses",
                 (torch.tensor([[0.0, -1.0986, -1.0986, -10.0]]).log_softmax(-1), 1.0,
                  0.5)),
            Case("12 tokens, temperature 1, top_p 0.95", (randn(g, 1, 12), 1.0, 0.95)),
            # probabilities 1/2, 1/4, 1/8, 1/16, 1/16 in some order (exact in floating point):
            # the two most likely tokens reach exactly 0.75, so the third is not needed
            Case("a nucleus of exactly top_p: 0.5 + 0.25 = 0.75",
                 (-math.log(2) * torch.tensor([[3.0, 0.0, 4.0, 1.0, 4.0, 2.0]]), 1.0, 0.75))]


def min_p_filter(logits: torch.Tensor, temperature: float, min_p: float) -> torch.Tensor:
    """Min-p sampling's filter: ``logits (B, V)`` divided by ``temperature``; a token whose
    probability (after the temperature) is below ``min_p`` times its row's largest one gets
    ``-inf``. The bar moves with the model's confidence."""
    logits = logits / temperature
    probs = logits.softmax(dim=-1)  # (B, V)
    bar = min_p * probs.max(dim=-1, keepdim=True).values  # (B, 1): one bar per row
    return logits.masked_fill(probs < bar, float("-inf"))


def _min_p_variant(before_temperature=False, absolute=False, strict=False, axis=-1,
                   fill=float("-inf"), probabilities=False):
    def variant(logits, temperature, min_p):
        probs = (logits if before_temperature else logits / temperature).softmax(dim=-1)
        bar = min_p if absolute else min_p * probs.max(dim=axis, keepdim=True).values
        drop = probs <= bar if strict else probs < bar
        if probabilities:
            return probs.masked_fill(drop, 0.0)
        return (logits / temperature).masked_fill(drop, fill)
    return variant


def _min_p_cases(g):
    return [Case("8 tokens, temperature 0.5, min_p 0.1", (3 * randn(g, 2, 8), 0.5, 0.1)),
            Case("6 tokens, temperature 2, min_p 0.3", (2 * randn(g, 3, 6), 2.0, 0.3)),
            Case("a token exactly at the bar: 0.25 of the top one, kept",
                 (torch.tensor([[2.0, 2.0 - math.log(4.0), -3.0, -9.0]]), 1.0, 0.25)),
            Case("4 rows of 5 tokens, temperature 1.5, min_p 0.2", (randn(g, 4, 5), 1.5, 0.2))]


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


def _rope_variant(pairs="adjacent", signs=(-1, 1), swap_cos_sin=False, rotate=(True, True),
                  layout="interleaved", angles="given", overwrite=False):
    """apply_rope with one slip: the ``pairs`` it takes, the ``signs`` of the sines, cos and sin
    swapped, only one of each pair rotated, the ``layout`` of the result, the ``angles`` used,
    or x[2i] ``overwrite``-n before x[2i+1] is computed from it."""
    def variant(x, a):
        L, d = x.shape[-2], x.shape[-1]
        a = {"given": a, "transposed": a.T, "first row": a[:1], "from 0": rope_angles(L, d),
             "repeated": a}[angles]
        cos, sin = (a.sin(), a.cos()) if swap_cos_sin else (a.cos(), a.sin())
        if angles == "repeated":  # full width, the angles twice: (c0, c1, ..., c0, c1, ...)
            cos, sin = cos.repeat(1, 2), sin.repeat(1, 2)
            turned = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
            return x * cos + turned * sin
        first, second = {"adjacent": (x[..., 0::2], x[..., 1::2]),
                         "swapped": (x[..., 1::2], x[..., 0::2]),
                         "halves": (x[..., :d // 2], x[..., d // 2:])}[pairs]
        new_first = first * cos + signs[0] * second * sin if rotate[0] else first
        if overwrite:
            first = new_first
        new_second = signs[1] * first * sin + second * cos if rotate[1] else second
        if layout == "cat":
            return torch.cat([new_first, new_second], dim=-1)
        stacked = torch.stack([new_first, new_second], dim=-1)
        return stacked if layout == "stacked" else stacked.flatten(-2)
    return variant


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
                 (randn(g, 1, 6, 6), rope_angles(6, 6, start=3))),
            Case("(B=1, h=2, L=4, d_k=8): angles (4, 4)",
                 (randn(g, 1, 2, 4, 8), rope_angles(4, 8)))]


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
            Pitfall("T1", "labels equal to the inputs", _labels_are_inputs, HINT_SHIFT),
            Pitfall("T1", "PAD_ID per prompt token, then the answer", _pad_per_prompt_token,
                    HINT_SHIFT),
            Pitfall("T1", "labels not shifted, <eos> fed", _unshifted_eos_fed, HINT_SHIFT),
            Pitfall(None, "the inputs shifted instead of the labels", _shifted_back,
                    "you moved the inputs one step left and labelled each position with the "
                    "token BEFORE it. The inputs start at <bos>, the sequence without its last "
                    "token; the label of position t is the token at t + 1."),
            Pitfall(None, "-100 for the prompt", _minus_100,
                    "the prompt's positions get PAD_ID (0), not -100: the course's loss ignores "
                    "PAD_ID (cross_entropy(..., ignore_index=PAD_ID)); -100 is only PyTorch's "
                    "default ignore_index."),
            Pitfall(None, "<eos> not scored", _eos_unscored, HINT_EOS_SCORED),
            Pitfall(None, "<eos>'s label made PAD_ID", _eos_label_padded, HINT_EOS_SCORED),
            Pitfall(None, "a second <eos>", _second_eos,
                    "the answer already ends with <eos> (it is French <eos>): add nothing to "
                    "it. sequence = prompt + answer."),
            Pitfall(None, "<eos> taken off the sequence", _eos_dropped,
                    "keep <eos> in the sequence: only the INPUT loses its last token (<eos>); "
                    "the labels end with it."),
            Pitfall(None, "(labels, inputs) returned", _swapped,
                    "return (inputs, labels), in this order."),
            Pitfall(None, "labels for the answer only", _answer_only,
                    "one label per input position: PAD_ID for each of the len(prompt) - 1 "
                    "positions whose next token is the prompt's, then the answer's tokens."),
            Pitfall(None, "<eos> fed, its label PAD_ID", _eos_fed_label_padded,
                    "the last token (<eos>) is a label only: nothing comes after it to predict, "
                    "so the input is the sequence without it (no PAD_ID needed at the end)."),
            Pitfall(None, "the prompt found by its ids", _masked_by_token(True),
                    HINT_BY_POSITION),
            Pitfall(None, "the answer found by its ids", _masked_by_token(False),
                    HINT_BY_POSITION),
            Pitfall(None, "the prompt list extended in place", _prompt_extended,
                    "prompt += answer (like prompt.extend(answer)) changes the caller's list: "
                    "the prompt you were given grows. Build a new list, "
                    "sequence = prompt + answer."),
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
            Pitfall(None, "the causal mask inverted", _gpt_forward(mask="inverted"),
                    "your mask lets each position see the FUTURE and hides the past: in the "
                    "course True = may attend, and causal_mask(L) is True on and below the "
                    "diagonal. Use causal_mask(L)[None, None] as it is (no ~, no torch.triu)."),
            Pitfall(None, "a 2-D causal mask", _gpt_forward(mask="2-D"), HINT_FOUR_AXES),
            Pitfall(None, "a 3-D causal mask", _gpt_forward(mask="3-D"), HINT_FOUR_AXES),
            Pitfall(None, "a float mask", _gpt_forward(mask="float"),
                    "the mask is a bool tensor, True = may attend: causal_mask(L)[None, None] "
                    "already is one (a 0/1 float mask, torch.ones(...).tril(), is refused)."),
            Pitfall(None, "the mask's length from the batch axis",
                    _gpt_forward(mask="batch length"),
                    "tokens is (B, L): the mask needs L = tokens.shape[1], the length of the "
                    "sequences, not tokens.shape[0], the batch size."),
            Pitfall(None, "the positions scaled too", _gpt_forward(embed="positions scaled too"),
                    "multiply the embeddings by sqrt(d_model) BEFORE self.positional: scaled "
                    "after it, the positions are scaled as well. "
                    "x = self.positional(self.embed(tokens) * math.sqrt(d_model))."),
            Pitfall(None, "scaled by d_model", _gpt_forward(embed="times d_model"),
                    "multiply by the square ROOT of d_model, math.sqrt(d_model), not d_model."),
            Pitfall(None, "scaled by sqrt(d_k)", _gpt_forward(embed="sqrt(d_k)"),
                    "the embeddings are scaled by sqrt(d_model), the width of the embedding; "
                    "sqrt(d_k) is attention's scale, inside the blocks."),
            Pitfall(None, "embeddings divided by sqrt(d_model)", _gpt_forward(embed="divided"),
                    "MULTIPLY the embeddings by sqrt(d_model) (dividing is attention's scale "
                    "for the scores, not for the embeddings)."),
            Pitfall(None, "the final norm after every block", _gpt_forward(final="every block"),
                    "self.final_norm comes once, after the LAST block: each block has its own "
                    "norms inside."),
            Pitfall(None, "the final norm before the blocks", _gpt_forward(final="before"),
                    "self.final_norm goes after the blocks, just before self.head: "
                    "self.head(self.final_norm(x))."),
            Pitfall(None, "no output layer", _gpt_forward(out="hidden"),
                    "end with self.head: it turns (B, L, d_model) into logits (B, L, V)."),
            Pitfall(None, "the embedding matrix without the head", _gpt_forward(out="embedding"),
                    "use self.head: its weight is the embedding's (tied), and it adds its own "
                    "bias, which x @ self.embed.weight.T leaves out."),
            Pitfall(None, "the blocks skipped", _gpt_forward(blocks="skipped"),
                    "run every block of self.blocks between the embedding and the output layer: "
                    "for block in self.blocks: x = block(x, mask)."),
            Pitfall(None, "every block given the embeddings", _gpt_forward(blocks="unchained"),
                    "feed each block the output of the one before: x = block(x, mask) inside "
                    "the loop, so that the blocks are stacked, not run side by side."),
            Pitfall(None, "the blocks called as one module", _gpt_forward(blocks="called at once"),
                    "self.blocks is a list of blocks (nn.ModuleList), not a module you can call: "
                    "for block in self.blocks: x = block(x, mask)."),
            Pitfall(None, "the mask tested for truth", _gpt_forward(test="truth"),
                    "test `mask is None`: `if not mask` or `mask or ...` ask a tensor for its "
                    "truth value, which fails as soon as a mask is given."),
            Pitfall(None, "the residual added again", _gpt_forward(blocks="residual added"),
                    "each block adds its own residual paths inside: x = block(x, mask), not "
                    "x + block(x, mask)."),
            Pitfall(None, "probabilities returned", _gpt_forward(out="softmax"),
                    "return the logits, self.head(...), without a softmax: the loss and "
                    "sample_next apply it themselves."),
            Pitfall(None, "log-probabilities returned", _gpt_forward(out="log_softmax"),
                    "return the logits, self.head(...), without log_softmax: cross_entropy "
                    "applies it itself."),
            Pitfall(None, "the last position only", _gpt_forward(out="last"),
                    "return logits for EVERY position, (B, L, V): training scores each position's "
                    "next token (generation takes logits[:, -1] itself)."),
            Pitfall(None, "the output layer untied", _UntiedGPT,
                    "keep the __init__ the notebook gives, self.head.weight = self.embed.weight "
                    "included: the output layer and the embedding share one matrix."),
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
            Pitfall("G4", "the crossing token dropped", _top_p_without_crossing, HINT_G4),
            Pitfall("G4", "the crossing token dropped (total < top_p)",
                    _nucleus(keep="total < top_p"), HINT_G4),
            Pitfall("G4", "the crossing token dropped, the first kept",
                    _nucleus(keep="total < top_p", first=True), HINT_G4),
            Pitfall("G4", "the crossing token dropped (total <= top_p), the first kept",
                    _nucleus(keep="total <= top_p", first=True), HINT_G4),
            Pitfall(None, "one token too many", _nucleus(keep="before <= top_p"),
                    "a token is needed only while the tokens ranked above it have NOT yet "
                    "reached top_p: drop it when their mass is >= top_p (not only > top_p). "
                    "Here 0.5 + 0.25 reach 0.75 exactly, so the third token goes."),
            Pitfall(None, "sorted in ascending order", _nucleus(order="ascending"),
                    "sort in DESCENDING order, logits.sort(dim=-1, descending=True): the "
                    "nucleus is made of the most likely tokens, counted from the top."),
            Pitfall(None, "no sort", _nucleus(order="none"),
                    "sort first, most likely first (logits.sort(dim=-1, descending=True)): the "
                    "running total must add the tokens from the most likely down, not in "
                    "vocabulary order."),
            Pitfall(None, "left in sorted order", _nucleus(back="none"), HINT_BACK),
            Pitfall(None, "gather instead of scatter", _nucleus(back="gather"),
                    "gather(-1, index) applies the sort's permutation a second time; to undo "
                    "it, scatter: torch.empty_like(logits).scatter(-1, index, ordered)."),
            Pitfall(None, "a sorted mask on unsorted logits", _nucleus(back="mask only"),
                    "your mask is in SORTED order but you applied it to the logits in vocabulary "
                    "order: scatter the mask (or the filtered sorted logits) back with the "
                    "sort's indices first."),
            Pitfall(None, "0 instead of -inf", _nucleus(fill=0.0),
                    "a logit of 0 still has a probability after the softmax: set the dropped "
                    "tokens to float('-inf')."),
            Pitfall(None, "probabilities returned", _nucleus(returned="probabilities"),
                    HINT_LOGITS),
            Pitfall(None, "renormalised probabilities returned",
                    _nucleus(returned="renormalised"), HINT_LOGITS),
            Pitfall(None, "log-probabilities returned", _nucleus(returned="log_softmax"),
                    "return the logits themselves, divided by the temperature, with -inf for "
                    "the dropped tokens: log_softmax shifts every kept logit."),
            Pitfall(None, "multiplied by the temperature", _nucleus(temperature="multiplied"),
                    "DIVIDE the logits by the temperature: a temperature above 1 must flatten "
                    "the distribution, below 1 sharpen it."),
            Pitfall(None, "softmax over the batch", _nucleus(probs_dim=0), HINT_ROWS),
            Pitfall(None, "running total over the batch", _nucleus(sum_dim=0), HINT_ROWS),
            Pitfall(None, "temperature ignored", _nucleus(temperature="ignored"),
                    "divide the logits by the temperature first (and return them divided): "
                    "the temperature is part of the filter's result."),
            Pitfall(None, "nothing filtered", _nucleus(assigned=False),
                    "nothing was dropped: masked_fill returns a NEW tensor, so assign its result "
                    "(ordered = ordered.masked_fill(drop, float('-inf'))), or nothing changes."),
        ),
    ),
    "generate_tokens": Exercise(
        reference=generate_cached,
        make_cases=generate_cases,
        sources=(generate_tokens,),
        outputs=("tokens", "calls (tokens fed, start)"),
        pitfalls=(
            Pitfall("D5", "the first position's logits", loop_with(position="first"),
                    "the next token comes from the last position's logits, logits[:, -1]: "
                    "after the prefill there is one row of logits per prompt token."),
            Pitfall("G7", "start always 0", loop_with(start="zero"), HINT_START),
            Pitfall("G7", "start one too far", loop_with(start="after"), HINT_START_OFF),
            Pitfall("G7", "start one too early", loop_with(start="before"), HINT_START_OFF),
            Pitfall("G7", "start counts the new tokens only", loop_with(start="new only"),
                    HINT_START_NEW),
            Pitfall("G7", "start counts the new tokens before it",
                    loop_with(start="new before"), HINT_START_NEW),
            Pitfall("G8", "no prefill", loop_with(prefill="none"),
                    "the first call must feed the whole prompt (the prefill, start=0), so that "
                    "the cache holds the keys and values of every prompt token; then one token "
                    "per step."),
            Pitfall("G9", "the prompt fed one token at a time", loop_with(prefill="one by one"),
                    "your tokens are right, but the prompt went through the model one token per "
                    "call: the prefill feeds the WHOLE prompt in one call, "
                    "cached_forward(model, prompt, cache, 0), so its P tokens are computed "
                    "together. The calls show (tokens fed, start) of each."),
            Pitfall("G10", "the whole sequence recomputed", generate_uncached,
                    "your tokens are right, but every step ran the whole sequence through the "
                    "model (model(out), or cached_forward on out at start 0): that is the loop "
                    "WITHOUT the cache. After the prefill, feed only the newest token, "
                    "cached_forward(model, out[:, -1:], cache, out.shape[1] - 1)."),
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
    "min_p_filter": Exercise(
        reference=min_p_filter,
        make_cases=_min_p_cases,
        sources=(min_p_filter,),
        pitfalls=(
            Pitfall("G3", "the bar before the temperature", _min_p_variant(before_temperature=True),
                    "divide by the temperature FIRST, then set the bar on the probabilities "
                    "after it: the filter must choose on the distribution the sample is drawn "
                    "from."),
            Pitfall(None, "an absolute bar", _min_p_variant(absolute=True),
                    "the bar is min_p TIMES the row's largest probability, "
                    "probs.max(dim=-1, keepdim=True).values * min_p, not min_p itself: it "
                    "rises when the model is sure."),
            Pitfall(None, "the token at the bar dropped", _min_p_variant(strict=True),
                    "a token whose probability equals the bar is kept: drop only probs < bar."),
            Pitfall(None, "the largest over the batch", _min_p_variant(axis=0),
                    "each row is its own distribution: the bar is that row's largest "
                    "probability, max over the last axis (dim=-1, keepdim=True)."),
            Pitfall(None, "probabilities returned", _min_p_variant(probabilities=True),
                    "return logits, as filter_logits does: the kept ones divided by the "
                    "temperature, the others -inf (sample_next applies the softmax)."),
            Pitfall(None, "0 instead of -inf", _min_p_variant(fill=0.0),
                    "a logit of 0 still has a probability after the softmax: set the dropped "
                    "tokens to float('-inf')."),
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
            Pitfall(None, "sum instead of mean",
                    lambda x, w, eps=1e-6: x / x.pow(2).sum(-1, keepdim=True).add(eps).sqrt() * w,
                    "the root MEAN square: average the squares over the features, "
                    "x.pow(2).mean(-1, keepdim=True), not their sum (which grows with d)."),
            Pitfall(None, "no square root",
                    lambda x, w, eps=1e-6: x / x.pow(2).mean(-1, keepdim=True).add(eps) * w,
                    "divide by the ROOT of the mean square, sqrt(mean(x^2) + eps): without "
                    "the root the output shrinks as x grows."),
            Pitfall(None, "the gain left out",
                    lambda x, w, eps=1e-6: x / x.pow(2).mean(-1, keepdim=True).add(eps).sqrt(),
                    "multiply by weight at the end, one gain per feature."),
            Pitfall(None, "eps ignored",
                    lambda x, w, eps=1e-6: x / x.pow(2).mean(-1, keepdim=True).sqrt() * w,
                    "use the eps you are given, under the root: sqrt(mean(x^2) + eps)."),
            Pitfall(None, "the mean of |x| instead of the root mean square",
                    lambda x, w, eps=1e-6: x / (x.abs().mean(-1, keepdim=True) + eps) * w,
                    "RMS is sqrt(mean(x^2) + eps): square, average, then the root; not the "
                    "mean of |x|."),
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
            Pitfall("G2", "halves, put back as adjacent pairs", _rope_variant(pairs="halves"),
                    "you rotated the pairs (x[i], x[i + d/2]) and put them back side by side. "
                    "The course pairs ADJACENT features (x[2i], x[2i+1]), as notebook 02 "
                    "interleaves sine and cosine: even, odd = x[..., 0::2], x[..., 1::2]."),
            Pitfall(None, "rotated the other way",
                    lambda x, a: apply_rope(x, -a),
                    "the rotation goes the other way: (x0, x1) -> (x0 cos - x1 sin, "
                    "x0 sin + x1 cos), a turn by +angle."),
            Pitfall(None, "the minus sign on the first component missing",
                    _rope_variant(signs=(1, 1)), HINT_ROPE_SIGN),
            Pitfall(None, "the minus sign on the second component", _rope_variant(signs=(-1, -1)),
                    HINT_ROPE_SIGN),
            Pitfall(None, "cos and sin swapped", _rope_variant(swap_cos_sin=True),
                    "cos and sin are swapped: a turn by the angle keeps x0 with cos, "
                    "(x0 cos - x1 sin, x0 sin + x1 cos); at angle 0 it must leave x unchanged."),
            Pitfall(None, "the rotated halves concatenated", _rope_variant(layout="cat"),
                    "each rotated pair must go back to ITS place, features 2i and 2i + 1: "
                    "torch.stack([new_even, new_odd], dim=-1).flatten(-2) interleaves them; "
                    "torch.cat puts all the first features before all the second ones."),
            Pitfall(None, "the pairs left on their own axis", _rope_variant(layout="stacked"),
                    "flatten the last two axes, (..., L, d_k / 2, 2) -> (..., L, d_k): "
                    ".flatten(-2) after the stack."),
            Pitfall(None, "only the first of each pair rotated",
                    _rope_variant(rotate=(True, False)), HINT_ROPE_BOTH),
            Pitfall(None, "only the second of each pair rotated",
                    _rope_variant(rotate=(False, True)), HINT_ROPE_BOTH),
            Pitfall(None, "x[2i] overwritten before use", _rope_variant(overwrite=True),
                    "the second component was computed from the NEW x[2i]: compute both "
                    "components from the original pair (even, odd taken before any assignment), "
                    "into a new tensor."),
            Pitfall(None, "the even and odd features swapped", _rope_variant(pairs="swapped"),
                    "the first feature of pair i is x[..., 2i], the even one: even, odd = "
                    "x[..., 0::2], x[..., 1::2]."),
            Pitfall(None, "the angles transposed", _rope_variant(angles="transposed"),
                    "angles is (L, d_k / 2), one row per position: angles[p, i] turns pair i "
                    "at position p. Use it as it is, without .T, so that it lines up with "
                    "x[..., 0::2] (..., L, d_k / 2)."),
            Pitfall(None, "each angle repeated, not interleaved", _rope_variant(angles="repeated"),
                    "with full-width cos and sin, features 2i and 2i + 1 share angle i: "
                    "repeat_interleave(2, dim=-1), (c0, c0, c1, c1, ...), not repeat or cat, "
                    "(c0, c1, ..., c0, c1, ...)."),
            Pitfall(None, "one angle for every position", _rope_variant(angles="first row"),
                    "each position has its own row of angles: position p turns by angles[p], "
                    "so use the whole (L, d_k / 2) table, not angles[0]."),
            Pitfall(None, "angles recomputed from position 0", _rope_variant(angles="from 0"),
                    "use the angles you are given: they may start at a later position (a KV "
                    "cache's new tokens), which rope_angles(L, d_k) from 0 forgets."),
        ),
    ),
}
