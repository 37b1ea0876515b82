"""Notebook 12's exercises: ``continuation_example`` (one pair's input and labels), ``gpt`` (the
forward, with the KV cache's lines), ``filter_logits`` (temperature and top-p), ``generate_tokens``
(the loop with the prefill), ``rms_norm``, ``apply_rope`` and ``min_p_filter``."""

import functools
import math
from dataclasses import dataclass, field

import torch
from torch import nn

from ..attention import KVCache
from ..continuation import continuation_example
from ..data import BOS_ID, EOS_ID, PAD_ID
from ..decoding import append_tokens
from ..generation import filter_logits, generate_tokens
from ..gpt import GPT, GPTConfig
from ..layers import rms_norm
from ..masks import causal_mask
from ..positional import apply_rope, rope_angles
from .cases import exercise, randn, seeded, slips
from .compare import whole
from .engine import Case, Exercise, ModuleCase, Pitfall, slip

VOCAB, SEP_ID = 12, 4  # the checkers' tiny models; joint_vocab puts <sep> after the 4 specials


def _config(**changes) -> GPTConfig:  # the checkers' tiny GPT
    return GPTConfig(**{"d_model": 16, "num_heads": 2, "num_layers": 2, "d_ff": 32,
                        "dropout": 0.0, "max_len": 16, **changes})


@dataclass(frozen=True)
class IdsCase(Case):
    """A call on fresh lists (one changed in place is an error); id lists come back as tensors."""

    def run(self, fn):
        args = [list(arg) for arg in self.args]
        result = fn(*args, **self.kwargs)
        if args != list(self.args):
            raise whole(ValueError("your function changed its input list in place: `prompt += "
                                   "answer` (or .extend, .append) changes the caller's list "
                                   "too. Build a new list, sequence = prompt + answer"))
        return tuple(torch.tensor(part, dtype=torch.long) if isinstance(part, (list, tuple))
                     and all(isinstance(i, int) for i in part) else part
                     for part in result) if isinstance(result, tuple) else result


def continuation_tensors(prompt, answer):
    """:func:`~helpers.continuation.continuation_example`, its two lists as tensors."""
    return tuple(torch.tensor(part) for part in continuation_example(prompt, answer))


def _example_cases(g):
    def words(n, low):
        return (low + torch.randperm(20, generator=g)[:n]).tolist()

    return [IdsCase(f"{e} English word(s), {f} French word(s) + <eos>",
                    ([BOS_ID, *words(e, 5), SEP_ID], [*words(f, 30), EOS_ID]))
            for e, f in ((4, 4), (1, 1), (2, 5))] + [  # joint_vocab: "a" is one id in both
        IdsCase("3 English words, 3 French words + <eos>, one id in both",
                ([BOS_ID, 7, 31, 9, SEP_ID], [33, 31, 40, EOS_ID]))]


# The prompt's labels: one PAD_ID per prompt token (unshifted), or the reference's.
P0, P1 = "[PAD_ID] * len(prompt) + ", "[PAD_ID] * (len(prompt) - 1) + "
LABELS = P1 + "answer"
FED, SEQUENCE = ("sequence[:-1], labels", "sequence, labels"), "sequence = prompt + answer"
SHIFT = ("the label of position t is the NEXT token, t + 1: unshifted, the model learns to copy "
         "the token it reads. Labels: the sequence moved one step left, PAD_ID at the "
         "len(prompt) - 1 positions whose next token is the prompt's.")
EOS = ("<eos> is the last label: the last French word's position predicts it, which teaches the "
       "model to stop. labels = [PAD_ID] * (len(prompt) - 1) + answer, <eos> included.")
FED_HINT = ("the last token (<eos>) is a label only: nothing comes after it, so the input is the "
            "sequence without its last token.")
BY_ID = ("tell the prompt apart by POSITION, not by token: a word both languages write alike "
         "(\"a\") is one id. The first len(prompt) - 1 labels are PAD_ID.")
FIRST_WORD = ("the position of <sep> predicts the first French word: its label is that word, not "
              "PAD_ID. Only the len(prompt) - 1 positions before it get PAD_ID.")
CONTINUATION_SLIPS = slips(continuation_example, [
    ("G5", "the prompt scored", (LABELS, "sequence[1:]"), None),
    ("T1", "not shifted", (LABELS, P0 + "answer[:-1]"), SHIFT),
    ("T1", "labels equal to the inputs", (LABELS, "sequence[:-1]"), SHIFT),
    ("T1", "each position its own token", (LABELS, P1 + "sequence[len(prompt) - 1:-1]"), SHIFT),
    ("T1", "PAD_ID per prompt token", (LABELS, P0 + "answer"), SHIFT),
    ("T1", "not shifted, <eos> fed", [(LABELS, P0 + "answer"), FED], SHIFT),
    (None, "the first word unscored", (LABELS, P0 + "answer[1:]"), FIRST_WORD),
    (None, "the first word unscored, <eos> fed", [(LABELS, P0 + "answer[1:] + [PAD_ID]"), FED],
     FIRST_WORD),
    (None, "shifted by two", (LABELS, P1 + "answer[1:] + [PAD_ID]"), "the label of position t "
     "is the token at t + 1, not t + 2: labels = [PAD_ID] * (len(prompt) - 1) + answer, so "
     "<sep>'s position predicts the first French word."),
    (None, "<sep> predicted", (LABELS, "[PAD_ID] * (len(prompt) - 2) + [prompt[-1], *answer]"),
     "<sep> is part of the prompt, given, not predicted: the position before it gets PAD_ID."),
    (None, "the last token fed", FED, FED_HINT),
    (None, "the inputs shifted", [("sequence[:-1], labels", "sequence[1:], labels"),
                                  (LABELS, P1 + "sequence[len(prompt) - 1:-1]")],
     "you moved the inputs one step left and labelled each position with the token BEFORE it. "
     "The inputs start at <bos>; the label of position t is the token at t + 1."),
    (None, "-100 for the prompt", (LABELS, "[-100] * (len(prompt) - 1) + answer"), "the "
     "prompt's positions get PAD_ID (0), not -100: the course's loss ignores PAD_ID; -100 is only "
     "PyTorch's default ignore_index."),
    (None, "<eos> not scored", (LABELS, P1 + "answer[:-1]"), EOS),
    (None, "<eos>'s label PAD_ID", (LABELS, P1 + "answer[:-1] + [PAD_ID]"), EOS),
    (None, "a second <eos>", [(LABELS, P1 + "answer + [EOS_ID]"),
                              (SEQUENCE, SEQUENCE + " + [EOS_ID]")],
     "the answer already ends with <eos>: add nothing to it. sequence = prompt + answer."),
    (None, "<eos> dropped", [(LABELS, P1 + "answer[:-1]"), (SEQUENCE, SEQUENCE + "[:-1]")],
     "keep <eos> in the sequence: only the INPUT loses its last token; the labels end with it."),
    (None, "swapped", ("sequence[:-1], labels", "labels, sequence[:-1]"),
     "return (inputs, labels), in this order."),
    (None, "the answer only", (LABELS, "list(answer)"), "one label per input position: PAD_ID "
     "for each of the len(prompt) - 1 positions whose next token is the prompt's, then the "
     "answer's tokens."),
    (None, "<eos> fed as PAD_ID", [(LABELS, P1 + "answer + [PAD_ID]"), FED], FED_HINT),
    (None, "the prompt by its ids",
     (LABELS, "[PAD_ID if t in prompt else t for t in sequence[1:]]"), BY_ID),
    (None, "the answer by its ids",
     (LABELS, "[t if t in answer else PAD_ID for t in sequence[1:]]"), BY_ID),
])


def _in_chunks(self, tokens, sizes):
    """``forward`` on ``tokens`` in chunks of ``sizes`` with one KVCache (a prefill, then steps):
    the logits of every position; an error if ``cache.length`` was not advanced."""
    cache, logits, at = KVCache(), [], 0
    for n in sizes:
        try:
            logits.append(self(tokens[:, at:at + n], cache=cache))
        except TypeError as error:  # a forward without the cache argument
            if "'cache'" not in str(error):
                raise
            raise whole(TypeError("keep the signature the notebook gives: forward(self, "
                                  "tokens, mask=None, cache=None)")) from None
        if not torch.is_tensor(logits[-1]):
            return logits[-1]  # for the usual messages about what was returned
        at += n
        if cache.length != at:
            raise whole(RuntimeError(f"after a call on {n} token(s), cache.length is "
                                     f"{cache.length}: forward must add L to it"))
    return torch.cat(logits, dim=1)


@dataclass(frozen=True)
class GPTCase(ModuleCase):
    """A :class:`ModuleCase` that also checks the tied output layer; with ``sizes``, the forward
    runs in chunks with a KVCache."""

    sizes: tuple = ()

    def run(self, cls):
        if self.sizes and isinstance(cls, type):
            cls = type(cls.__name__, (cls,), {"in_chunks": _in_chunks})
        try:
            result = super().run(cls)
        except NotImplementedError as error:  # torch's, for a module without forward
            if 'missing the required "forward" function' not in str(error):
                raise
            raise whole(TypeError("self.blocks is an nn.ModuleList, without a forward of its "
                                  "own: call each block in turn")) from None
        module = seeded(0, cls, **self.init)
        head, embed = getattr(module, "head", None), getattr(module, "embed", None)
        if head is not None and embed is not None and head.weight is not embed.weight:
            raise whole(ValueError(
                "keep the __init__ the notebook gives: self.head.weight = self.embed.weight "
                "ties the output layer to the embedding; your head has a weight of its own"))
        return result


def _gpt_cases(g):
    def case(label, length, changes=None, batch=2, padded=False, sizes=()):
        tokens, mask = torch.randint(5, VOCAB, (batch, length), generator=g), None
        if padded:  # the last sequence ends two tokens early: causal and padding (B, 1, L, L)
            tokens[-1, -2:] = PAD_ID
            mask = causal_mask(length) & (tokens != PAD_ID)[:, None, None, :]
        return GPTCase(label, (tokens, sizes) if sizes else (tokens, mask), weights_of=GPT,
                       init={"vocab_size": VOCAB, "config": _config(max_len=10, **changes or {})},
                       sizes=sizes, method="in_chunks" if sizes else "forward")

    return [case("pre-norm, 2 blocks, L=6, mask=None (causal)", 6),
            case("post-norm (norm_first=False), L=5, mask=None", 5, {"norm_first": False}),
            case("pre-norm, a causal and padding mask (B, 1, L, L) given", 6, padded=True),
            case("SwiGLU blocks, one sequence of length 1", 1, {"ffn": "swiglu"}, batch=1),
            case("a KVCache: a prefill of 4 tokens, then 1, 1", 6, sizes=(4, 1, 1)),
            case("a KVCache: a prefill of 3 tokens, then 2 at once, then 1", 6, sizes=(3, 2, 1))]


class _UntiedGPT(GPT):  # the tying line of __init__ dropped: a head weight of its own
    def __init__(self, vocab_size, config):
        super().__init__(vocab_size, config)
        self.head.weight = nn.Parameter(self.embed.weight.detach().clone())


HEAD, BLOCK = "self.head(self.final_norm(x))", "x = block(x, mask, cache)"
ROWS = "[None, None, start:]"
SCALE, POS = "x = self.embed(tokens) * math.sqrt(c.d_model)", "return self.positional(x, start)"
UNSCALED = (SCALE, "x = self.embed(tokens)")
AXES = ("the mask needs four axes, (1, 1, L, L), to broadcast over the batch and the heads of the "
        "scores (B, h, L, L): causal_mask(L)[None, None].")
GPT_SLIPS = (*slips(GPT, [
    ("G6", "no causal mask by default", ("if mask is None:", "if False:"), None),
    (None, "no final norm", (HEAD, "self.head(x)"), "a pre-norm stack ends with one more norm "
     "before the output layer: self.head(self.final_norm(x)) (final_norm is nn.Identity in "
     "post-norm)."),
    (None, "the given mask ignored", ("if mask is None:", "if True:"), "use the mask you are "
     "given (it also hides the padding); build the causal one only when mask is None."),
    (None, "the causal mask inverted", ("mask = causal_mask(", "mask = ~causal_mask("),
     "your mask lets each position see the FUTURE and hides the past: True = may attend, and "
     "causal_mask(L) is True on and below the diagonal."),
    (None, "a 2-D causal mask", (ROWS, "[start:]"), AXES),
    (None, "a 3-D causal mask", (ROWS, "[None, start:]"), AXES),
    (None, "a float mask", (ROWS, ROWS + ".float()"), "the mask is a bool tensor, True = may "
     "attend: causal_mask(L)[None, None] is one (a 0/1 float mask, torch.ones(...).tril(), is "
     "refused)."),
    (None, "the length from the batch axis", ("shape[1], device", "shape[0], device"),
     "tokens is (B, L): the mask needs L = tokens.shape[1], not tokens.shape[0], the batch size."),
    (None, "the final norm after every block",
     [(BLOCK, "x = self.final_norm(block(x, mask, cache))"), (HEAD, "self.head(x)")],
     "self.final_norm comes once, after the LAST block: each block has its own norms."),
    (None, "no output layer", (HEAD, "self.final_norm(x)"),
     "end with self.head: it turns (B, L, d_model) into logits (B, L, V)."),
    (None, "the embedding as the head", (HEAD, "self.final_norm(x) @ self.embed.weight.T"),
     "use self.head: its weight is the embedding's (tied), and it adds its own bias."),
    (None, "every block given the embeddings",
     [(BLOCK, "h = block(x, mask, cache)"), (HEAD, "self.head(self.final_norm(h))")],
     "feed each block the output of the one before: x = block(x, mask, cache) in the loop, so "
     "that the blocks are stacked, not run side by side."),
    (None, "the blocks called as one module",
     ("for block in self.blocks:\n        " + BLOCK, "x = self.blocks(x, mask)"),
     "self.blocks is a list of blocks (nn.ModuleList), not a module you can call: for block in "
     "self.blocks: x = block(x, mask, cache)."),
    (None, "the mask tested for truth", ("if mask is None:", "if not mask:"), "test `mask is "
     "None`: `if not mask` asks a tensor for its truth value, which fails as soon as a mask is "
     "given."),
    (None, "the residual added again", (BLOCK, "x = x + block(x, mask, cache)"),
     "each block adds its own residual paths inside: x = block(x, mask, cache)."),
    (None, "probabilities returned", (HEAD, HEAD + ".softmax(-1)"),
     "return the logits without a softmax: the loss and sample_next apply it."),
    (None, "log-probabilities returned", (HEAD, HEAD + ".log_softmax(-1)"),
     "return the logits without log_softmax: cross_entropy applies it itself."),
    (None, "the last position only", (HEAD, HEAD + "[:, -1]"),
     "return logits for EVERY position, (B, L, V): training scores each position."),
    ("G7", "a cached step at position 0", ("else cache.length", "else 0"), None),
    ("G7", "the cache's length not advanced", ("cache.length += tokens.shape[1]", "pass"), None),
    (None, "the cache not passed to the blocks", (BLOCK, "x = block(x, mask)"), "pass the cache "
     "on to every block, x = block(x, mask, cache): each block's attention keeps its keys and "
     "values in it."),
    (None, "the causal mask of the new tokens only", [("causal_mask(start + tokens.shape[1]",
                                                       "causal_mask(tokens.shape[1]"),
                                                      (ROWS, "[None, None]")],
     "with a cache the new tokens attend to the cached keys too: their rows of the causal mask "
     "over start + L keys, causal_mask(start + L)[None, None, start:]."),
]), *slips(GPT, [
    ("T2", "embeddings not scaled", UNSCALED, None),
    (None, "no positions", (POS, "return x"), "add the positions: self.positional(x, start) adds "
     "the sinusoidal table's rows and dropout. Without them attention cannot tell the order of "
     "the tokens."),
    (None, "the positions scaled too", [UNSCALED, (POS, POS + " * c.d_model ** 0.5")],
     "multiply the embeddings by sqrt(d_model) BEFORE self.positional: scaled after it, the "
     "positions are scaled as well."),
    (None, "scaled by d_model", ("math.sqrt(c.d_model)", "c.d_model"),
     "multiply by the square ROOT of d_model, math.sqrt(d_model), not d_model."),
    (None, "scaled by sqrt(d_k)", ("(c.d_model)", "(c.d_model // c.num_heads)"), "the "
     "embeddings are scaled by sqrt(d_model), their width; sqrt(d_k) is attention's scale, inside "
     "the blocks."),
    (None, "divided by sqrt(d_model)", ("* math.sqrt", "/ math.sqrt"),
     "MULTIPLY the embeddings by sqrt(d_model) (dividing is attention's scale for the scores)."),
], method="embed_tokens"), Pitfall(None, "the output layer untied", _UntiedGPT, "keep the "
                                   "__init__ the notebook gives, self.head.weight = "
                                   "self.embed.weight included: the output layer and the "
                                   "embedding share one matrix."))


def filter_top_p(logits, temperature, top_p):
    """:func:`~helpers.generation.filter_logits` with the temperature and top-p only."""
    return filter_logits(logits, temperature, top_p=top_p)


def _filter_cases(g):
    return [Case("8 tokens, temperature 0.5, top_p 0.9", (3 * randn(g, 2, 8), 0.5, 0.9)),
            Case("6 tokens, temperature 2, top_p 0.6", (2 * randn(g, 3, 6), 2.0, 0.6)),
            Case("one token of 0.6, top_p 0.5: the first token crosses",
                 (torch.tensor([[0.0, -1.0986, -1.0986, -10.0]]).log_softmax(-1), 1.0, 0.5)),
            Case("12 tokens, temperature 1, top_p 0.95", (randn(g, 1, 12), 1.0, 0.95)),
            # probabilities 1/2, 1/4, 1/8, 1/16, 1/16 (exact in floating point): the two most
            # likely tokens reach exactly 0.75, so the third is not needed
            Case("a nucleus of exactly top_p: 0.5 + 0.25 = 0.75",
                 (-math.log(2) * torch.tensor([[3.0, 0.0, 4.0, 1.0, 4.0, 2.0]]), 1.0, 0.75))]


# The learner's signature; and a learner's top-p seldom keeps the first token on purpose.
SIGNATURE = ("temperature: float = 1.0, top_k=None, top_p=None", "temperature, top_p, top_k=None")
NO_FIRST = ("drop[..., 0] = False", "pass")
TEMP, DROP = "logits = logits / temperature", "drop = before >= top_p"
FILL = 'ordered = ordered.masked_fill(drop, float("-inf"))'
BACK = "logits = torch.empty_like(logits).scatter_(-1, index, ordered)"
BY_ROW = ("each row is its own distribution: its softmax, running total (cumsum) and largest "
          "probability go over the last axis, dim=-1.")
LOGITS = ("return logits, not probabilities: the kept ones divided by the temperature, the "
          "others float('-inf'); sample_next applies the softmax itself.")
INF = "a logit of 0 still has a probability: set the dropped tokens to float('-inf')."
FILTER_SLIPS = (*slips(filter_logits, [
    ("G3", "top-p before the temperature",
     [(TEMP, "pass"), ("return logits", "return logits / temperature")], None),
    ("G4", "total > top_p dropped", (DROP, "drop = before + probs > top_p"), None),
    ("G4", "total >= top_p dropped", (DROP, "drop = before + probs >= top_p"), None),
    (None, "one token too many", (DROP, "drop = before > top_p"), "a token is needed only while "
     "the tokens above it have NOT yet reached top_p: drop it when their mass is >= top_p. Here "
     "0.5 + 0.25 reach 0.75, so the third token goes."),
    (None, "ascending order", ("descending=True", "descending=False"),
     "sort in DESCENDING order: the nucleus is made of the most likely tokens."),
    (None, "no sort", ("logits.sort(dim=-1, descending=True)",
                       "logits, torch.arange(logits.shape[-1]).expand_as(logits)"),
     "sort first, most likely first: the running total must add the tokens from the most likely "
     "down, not in vocabulary order."),
    (None, "left in sorted order", (BACK, "logits = ordered"), "put the kept logits back in "
     "VOCABULARY order: scatter the sorted row back with the sort's indices, "
     "torch.empty_like(logits).scatter(-1, index, ordered)."),
    (None, "gather instead of scatter", (BACK, "logits = ordered.gather(-1, index)"),
     "gather(-1, index) applies the sort's permutation a second time; scatter undoes it."),
    (None, "a sorted mask on unsorted logits",
     [(FILL, "pass"), (BACK, 'logits = logits.masked_fill(drop, float("-inf"))')],
     "your mask is in SORTED order but the logits are in vocabulary order: scatter it back with "
     "the sort's indices first."),
    (None, "0 instead of -inf", (FILL, "ordered = ordered.masked_fill(drop, 0.0)"), INF),
    (None, "probabilities", (FILL, "ordered = probs.masked_fill(drop, 0.0)"), LOGITS),
    (None, "renormalised", ("return logits", "return logits.softmax(-1)"), LOGITS),
    (None, "log-probabilities", ("return logits", "return logits.log_softmax(-1)"),
     "return the logits themselves, -inf for the dropped ones: log_softmax shifts them."),
    (None, "multiplied by the temperature", (TEMP, "logits = logits * temperature"),
     "DIVIDE the logits by the temperature: above 1 it must flatten the distribution."),
    (None, "softmax over the batch", ("ordered.softmax(dim=-1)", "ordered.softmax(0)"), BY_ROW),
    (None, "running total over the batch", ("cumsum(dim=-1)", "cumsum(dim=0)"), BY_ROW),
    (None, "temperature ignored", (TEMP, "pass"),
     "divide the logits by the temperature first: it is part of the filter's result."),
    (None, "nothing filtered", (FILL, FILL[len("ordered = "):]),
     "nothing was dropped: masked_fill returns a NEW tensor, so assign its result."),
], SIGNATURE, NO_FIRST), *slips(filter_logits, [
    ("G4", "total >= top_p, the first kept", (DROP, "drop = before + probs >= top_p"), None),
    ("G4", "total > top_p, the first kept", (DROP, "drop = before + probs > top_p"), None),
], SIGNATURE))


@dataclass(frozen=True)
class GenerateCase(Case):
    """The learner's loop on a tiny GPT (weights from ``seed``, ``<eos>`` likelier by
    ``eos_bias``), sampling from a generator seeded with ``sample_seed``: the tokens and the
    model's calls ``(tokens fed, start)``, so that a loop that ignores the cache is named."""

    config: GPTConfig = field(default_factory=GPTConfig)
    seed: int = 0
    eos_bias: float = 0.0
    sample_seed: int = 0

    def run(self, fn):
        model = seeded(self.seed, GPT, VOCAB, self.config)
        with torch.no_grad():  # an output layer of its own: a random tied GPT repeats its input
            model.head.weight = nn.Parameter(torch.randn(
                VOCAB, self.config.d_model, generator=torch.Generator().manual_seed(self.seed)))
            model.head.bias[EOS_ID] += self.eos_bias
        calls, embed = [], model.embed_tokens
        model.embed_tokens = lambda tokens, start=0: calls.append(
            (tokens.shape[1], int(start))) or embed(tokens, start)
        generator = torch.Generator().manual_seed(self.sample_seed)
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(self.seed)  # a draw without the generator: the same each time
            tokens = fn(model, *self.args, **{**self.kwargs, "generator": generator})
        if not torch.is_tensor(tokens) or tokens.dim() != 2:
            return tokens  # for the usual messages about what was returned
        made = max(tokens.shape[1] - self.args[0].shape[1], 0)  # (-1, -1): no call made it
        calls = (calls + [(-1, -1)] * made)[:made]
        return tokens, torch.tensor(calls, dtype=torch.long).reshape(made, 2)


# The loop WITHOUT the cache: the same tokens, but the whole sequence at every step
generate_uncached = functools.partial(generate_tokens, use_cache=False)


def _generate_cases(g):
    def prompts(batch, length):  # <bos> words <sep>
        return torch.cat([torch.full((batch, 1), BOS_ID), torch.randint(
            5, VOCAB, (batch, length - 2), generator=g), torch.full((batch, 1), SEP_ID)], dim=1)

    return [GenerateCase("greedy, 3 prompts of 5 tokens, max_new=6", (prompts(3, 5), 6),
                         config=_config()),
            GenerateCase("greedy, rotary positions, until every row has <eos>",
                         (prompts(3, 4), 10), config=_config(positions="rope"), seed=1,
                         eos_bias=0.5),  # the rows end after 1, 3 and 1 new tokens
            GenerateCase("sampled at temperature 1 (seeded generator), 4 prompts",
                         (prompts(4, 4), 6), {"temperature": 1.0}, config=_config(),
                         seed=7, eos_bias=2.0, sample_seed=3),  # ends after 2, 4, 2, 3
            GenerateCase("post-norm, max_len=9 reached by a prompt of 5", (prompts(2, 5), 8),
                         config=_config(norm_first=False, max_len=9), eos_bias=2.0)]


NEW = "new = out if cache is None or cache.length == 0 else out[:, -1:]"
CALL, STEPS = "logits = model(new, cache=cache)", "max_len - prompt.shape[1])"
D6 = ("once a row has written <eos>, every later token of that row is <eos> (sample_next still "
      "runs for it: replace its token), and the loop stops when EVERY row has.")
LENGTH = "at most min(max_new, model.config.max_len - P) new tokens: positions 0 ... max_len-1."
GENERATE_SLIPS = (*slips(generate_tokens.__wrapped__, [  # the loop under its no_grad
    ("D5", "the first position's logits", ("logits[:, -1]", "logits[:, 0]"), "the next token "
     "comes from the last position's logits, logits[:, -1]: after the prefill there is one row "
     "of logits per prompt token."),
    ("G8", "no prefill", (NEW, "new = out[:, -1:]"), None),
    ("G9", "the prompt one token at a time", (CALL, "logits = torch.cat([model(new[:, i:i + 1], "
                                                    "cache=cache) for i in range(new.shape[1])]"
                                                    ", dim=1)"), None),
    ("G7", "a new KVCache at every step",
     (CALL, "logits = model(new, cache=KVCache() if cache.length else cache)"), None),
    (None, "the last prompt token fed again", (NEW, "new = out[:, -1:]\n        if cache.length "
                                                    "== 0:\n            model(out, cache=cache)"),
     "the prefill's last row of logits gives the first new token: fed again, the last prompt "
     "token is stored twice in the cache."),
    (None, "the whole sequence fed again", (NEW, "new = out"), "after the prefill, feed only the "
     "newest token, out[:, -1:]: the cache holds the others' keys and values, and fed again they "
     "would be stored twice."),
    *(("D6", f"stopped when {stop}", ("finished.all()", stop), D6)
      for stop in ("finished.any()", "finished[0]", "False")),
    (None, "max_len ignored", ("min(max_new, model.config." + STEPS, "max_new"), LENGTH),
    (None, "one token short", (STEPS, STEPS[:-1] + " - 1)"), LENGTH),
    (None, "the generator not passed on", ("top_p, generator)", "top_p)"),
     "pass generator=generator on to sample_next: the samples must come from it."),
    (None, "always greedy", ("sample_next(logits[:, -1], temperature, top_k, top_p, generator)",
                             "logits[:, -1].argmax(dim=-1)"),
     "choose with sample_next(logits[:, -1], temperature, generator=generator): greedy at "
     "temperature 0, a draw from the distribution otherwise."),
]), Pitfall("G10", "the whole sequence recomputed", generate_uncached),
    Pitfall("D6", "finished rows not kept at <eos>", slip(generate_tokens.__wrapped__, names={
        "append_tokens": slip(append_tokens, ("next_token = next_token.masked_fill(finished, "
                                              "eos_id)", "pass"))}), D6))


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


def _rope_repeated(x, angles):  # full-width angles as (c0, c1, ..., c0, c1, ...)
    cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)
    return x * cos + torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2) * sin


CHECK, PAIRS, HALVES = "check_rope(x, angles)", "x[..., 0::2], x[..., 1::2]", "x.chunk(2, dim=-1)"
FIRST, SECOND = "even * cos - odd * sin", "even * sin + odd * cos"
CAT = [("torch.stack(", "torch.cat("), (".flatten(-2)", "")]
SIGN = ("one sine has a minus, the other not: (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos). "
        "Otherwise the pair is stretched or mirrored, not turned.")
BOTH = "turn BOTH features of each pair, both from the original pair."
ROPE_SLIPS = (*slips(apply_rope, [  # each without the input check, which a learner seldom writes
    ("G2", "halves", [(PAIRS, HALVES), *CAT], None),
    ("G2", "halves, put back as pairs", (PAIRS, HALVES), None),
    (None, "the other way", ("angles.sin()", "(-angles).sin()"),
     "the rotation goes the other way: (x0 cos - x1 sin, x0 sin + x1 cos) turns by +angle."),
    (None, "no minus", (FIRST, "even * cos + odd * sin"), SIGN),
    (None, "the minus on the second", (SECOND, "-" + SECOND), SIGN),
    (None, "cos and sin swapped", ("cos, sin = ", "sin, cos = "),
     "cos and sin are swapped: at angle 0 the turn must leave x unchanged."),
    (None, "concatenated", CAT, "each rotated pair goes back to ITS place, features 2i and 2i + "
     "1: torch.stack([...], dim=-1).flatten(-2) interleaves them; torch.cat does not."),
    (None, "not flattened", (".flatten(-2)", ""),
     "flatten the last two axes, (..., L, d_k / 2, 2) -> (..., L, d_k)."),
    (None, "only the first rotated", (SECOND, "odd"), BOTH),
    (None, "only the second rotated", (FIRST, "even"), BOTH),
    (None, "x[2i] overwritten", (SECOND, f"({FIRST}) * sin + odd * cos"), "the second "
     "component was computed from the NEW x[2i]: compute both from the original pair, into a "
     "new tensor."),
    (None, "even and odd swapped", ("even, odd = ", "odd, even = "),
     "the first feature of pair i is x[..., 2i], the even one."),
], (CHECK, "pass")), *slips(apply_rope, [  # the input check replaced
    (None, "the angles transposed", (CHECK, "angles = angles.T"),
     "angles is (L, d_k / 2), one row per position: use it as it is, without .T."),
    (None, "one angle", (CHECK, "angles = angles[:1]"),
     "each position has its own row of angles: position p turns by angles[p]."),
    (None, "angles from 0", (CHECK, "angles = rope_angles(x.shape[-2], x.shape[-1])"),
     "use the angles you are given: they may start at a later position (a KV cache's)."),
]), Pitfall(None, "repeated", _rope_repeated,
            "features 2i and 2i + 1 share angle i: repeat_interleave(2, dim=-1), not repeat."))


def min_p_filter(logits: torch.Tensor, temperature: float, min_p: float) -> torch.Tensor:
    """``logits (B, V)`` / ``temperature``; a token whose probability is below ``min_p`` times
    its row's largest one gets ``-inf`` (the bar moves with the model's confidence)."""
    logits = logits / temperature
    probs = logits.softmax(dim=-1)  # (B, V)
    bar = min_p * probs.max(dim=-1, keepdim=True).values  # (B, 1): one bar per row
    return logits.masked_fill(probs < bar, float("-inf"))


def _min_p_cases(g):
    return [Case("8 tokens, temperature 0.5, min_p 0.1", (3 * randn(g, 2, 8), 0.5, 0.1)),
            Case("6 tokens, temperature 2, min_p 0.3", (2 * randn(g, 3, 6), 2.0, 0.3)),
            Case("a token exactly at the bar: 0.25 of the top one, kept",
                 (torch.tensor([[2.0, 2.0 - math.log(4.0), -3.0, -9.0]]), 1.0, 0.25)),
            Case("4 rows of 5 tokens, temperature 1.5, min_p 0.2", (randn(g, 4, 5), 1.5, 0.2))]


EXERCISES: dict[str, Exercise] = {
    "continuation_example": Exercise(continuation_tensors, _example_cases, CONTINUATION_SLIPS,
                                     (continuation_example,), ("inputs", "labels")),
    "gpt": Exercise(GPT, _gpt_cases, GPT_SLIPS, (GPT.forward, GPT.embed_tokens), ("logits",)),
    "filter_logits": Exercise(filter_top_p, _filter_cases, FILTER_SLIPS, (filter_logits,)),
    "generate_tokens": Exercise(generate_tokens, _generate_cases, GENERATE_SLIPS,
                                (generate_tokens,), ("tokens", "calls (tokens fed, start)")),
    "rms_norm": exercise(
        rms_norm, _rms_cases, "output",
        ("G1", "the mean subtracted",
         ("rms = x", "x = x - x.mean(dim=-1, keepdim=True)\n    rms = x"), None),
        (None, "eps outside the root", (".add(eps).sqrt()", ".sqrt() + eps"),
         "eps goes inside the square root, as in notebook 04 (N2): sqrt(mean(x^2) + eps)."),
        (None, "sum instead of mean", (".mean(", ".sum("),
         "the root MEAN square: average the squares, not their sum (which grows with d)."),
        (None, "no square root", (".add(eps).sqrt()", ".add(eps)"),
         "divide by the ROOT of the mean square, sqrt(mean(x^2) + eps)."),
        (None, "the gain left out", ("x / rms * weight", "x / rms"),
         "multiply by weight at the end, one gain per feature."),
        (None, "eps ignored", (".add(eps)", ""),
         "use the eps you are given, under the root: sqrt(mean(x^2) + eps)."),
        (None, "the mean of |x|", ("x.pow(2).mean(dim=-1, keepdim=True).add(eps).sqrt()",
                                   "x.abs().mean(-1, True) + eps"),
         "RMS is sqrt(mean(x^2) + eps): square, average, then the root; not the mean of |x|."),
        (None, "the wrong axis", ("dim=-1", "dim=0"),
         "each vector is normalised over its own features: the mean over the LAST axis.")),
    "apply_rope": Exercise(apply_rope, _rope_cases, ROPE_SLIPS, (apply_rope,)),
    "min_p_filter": exercise(
        min_p_filter, _min_p_cases, "output",
        ("G3", "the bar before the temperature", [(TEMP, "scaled = logits / temperature"), (
            "return logits.masked_fill", "return scaled.masked_fill")], None),
        (None, "an absolute bar", ("min_p * probs.max(dim=-1, keepdim=True).values", "min_p"),
         "the bar is min_p TIMES the row's largest probability: it rises with the model's "
         "confidence."),
        (None, "the bar dropped", ("probs < bar", "probs <= bar"),
         "a token whose probability equals the bar is kept: drop only probs < bar."),
        (None, "over the batch", (".max(dim=-1", ".max(dim=0"), BY_ROW),
        (None, "probabilities", ('logits.masked_fill(probs < bar, float("-inf"))',
                                 "probs.masked_fill(probs < bar, 0)"), LOGITS),
        (None, "0 instead of -inf", ('float("-inf")', "0.0"), INF)),
}
