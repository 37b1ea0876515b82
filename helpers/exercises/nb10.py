"""Notebook 10's exercises: ``greedy_decode``, ``beam_step``, ``beam_search`` and
``kv_cache_decode`` (the KV cache's lines in multi-head attention), slips as edits of these."""

import copy
from dataclasses import dataclass

import torch
from torch import nn

from ..attention import KVCache, MultiHeadAttention
from ..decoding import append_tokens, beam_search, beam_step, eval_mode, greedy_decode
from ..masks import causal_mask, padding_mask
from ..model import TransformerConfig, build_model
from .cases import randn, seeded, slips
from .engine import Case, Exercise, Pitfall, slip
from .pitfalls import HINTS


def small_model(seed, src_shape, eos_bias=1.0, layers=1):
    """A seeded random translator (12 tokens) with EOS (id 2) made likelier, and source ids."""
    config = TransformerConfig(d_model=16, num_heads=2, num_layers=layers, d_ff=32, dropout=0.0)
    model, src = seeded(seed, lambda: (build_model(config, 12, 12).eval(),
                                       torch.randint(3, 12, src_shape)))
    with torch.no_grad():
        model.generator.bias[2] += eos_bias
    return model, src


@dataclass(frozen=True)
class _ListsCase(Case):
    """``beam_step``'s lists of ``(row, token, sum)``, or ``beam_search``'s ``(tokens, score)``
    pairs (tokens padded with -1), as tensors."""

    def run(self, fn):
        result = super().run(fn)
        try:
            if len(self.args) == 4:  # beam_step: (sums, log_probs, beam_size, eos_id)
                lists = [[(int(r), int(t), float(s)) for r, t, s in listed] for listed in result]
                return tuple(x for listed in lists for x in (
                    torch.tensor([c[:2] for c in listed], dtype=torch.long).view(-1, 2),
                    torch.tensor([c[2] for c in listed], dtype=torch.float32)))
            pairs = [(list(map(int, tokens)), float(score)) for tokens, score in result]
        except (TypeError, ValueError, RuntimeError):
            return result  # None, a string, a tensor...: reported as it is
        width = max((len(t) for t, _ in pairs), default=0)
        return (torch.tensor([t + [-1] * (width - len(t)) for t, _ in pairs], dtype=torch.long),
                torch.tensor([score for _, score in pairs], dtype=torch.float32))


def _greedy_cases(g):
    def case(label, seed, batch=4, max_len=8):
        model, src = small_model(seed, (batch, 5))  # rows end after 1 to 5 tokens
        src[-1, 3:] = 0  # the last sentence is padded (PAD id 0)
        return Case(label, (model, src, max_len, 1, 2, padding_mask(src, 0)))

    return [case("4 sentences that end after 5, 4, 3 and 1 tokens", 0),
            case("4 sentences that end after 3, 4, 2 and 2 tokens", 1),
            case("4 sentences that never end: cut at max_len = 8", 2),
            case("one sentence", 0, batch=1)]


def _beam_step_cases(g):
    def case(label, sums, log_probs, beam_size, last_step=False):
        n, V = log_probs.shape
        return _ListsCase(f"{label}; n={n}, V={V}, beam_size={beam_size}",
                          (torch.tensor(sums), log_probs, beam_size, 2),  # EOS is id 2
                          {"last_step": last_step})

    def table(n, V, spread=2.0, eos_shift=0.0):
        logits = spread * randn(g, n, V)
        logits[:, 2] += eos_shift  # EOS made less (or more) likely
        return logits.log_softmax(dim=-1)

    by_hand = lambda *rows: torch.tensor(rows).log()  # probabilities -> log-probabilities
    return [
        case("the first step (one hypothesis, sum 0)", [0.0], table(1, 9, eos_shift=-4.0), 3),
        case("three hypotheses, none ends", [-0.5, -1.0, -4.0], table(3, 8, eos_shift=-6.0), 3),
        case("one hypothesis far ahead of the others", [-0.1, -6.0, -7.0],
             table(3, 7, spread=0.5, eos_shift=-4.0), 3),
        # best first: row 1 + token 1, row 0 + EOS, row 0 + token 0, row 0 + token 3
        case("an <eos> among the 2 best: it ends, 2 others are kept", [-0.5, -0.3],
             by_hand([0.3, 0.05, 0.5, 0.1, 0.05], [0.01, 0.97, 0.01, 0.005, 0.005]), 2),
        # best first: row 0 + token 0, row 1 + token 1, row 1 + EOS, row 0 + token 1
        case("an <eos> ranked third, with beam_size 2", [-0.2, -0.4],
             by_hand([0.9, 0.03, 0.01, 0.03, 0.03], [0.05, 0.6, 0.3, 0.025, 0.025]), 2),
        # best first: row 0 + token 0, row 1 + EOS, row 2 + EOS (pruned), row 0 + token 1
        case("two <eos> among the 3 best, with beam_size 2", [-0.1, -0.2, -0.3], by_hand(
            [0.8, 0.1, 0.01, 0.09], [0.05, 0.05, 0.85, 0.05], [0.05, 0.05, 0.85, 0.05]), 2),
        case("the last step: the 3 best all end, whatever their token", [-0.5, -1.0, -1.5],
             table(3, 6, eos_shift=-1.0), 3, last_step=True),
        case("long hypotheses (sums near -800: probabilities underflow)", [-800.0, -801.0],
             table(2, 7, eos_shift=-6.0), 4),
    ]


def _beam_cases(g):
    def case(label, seed, beam_size, alpha=0.0, bias=1.0):  # hypotheses end at many lengths
        return _ListsCase(label, (*small_model(seed, (1, 5), bias), beam_size, 6, 1, 2),
                          {"length_penalty": alpha})

    return [case("width 3, no length penalty", 0, 3),
            case("width 3, length penalty 0.6", 1, 3, alpha=0.6),
            case("width 2, length penalty 1.0", 2, 2, alpha=1.0),
            case("width 4, EOS rarely likely", 3, 4, bias=0.0)]


@dataclass(frozen=True)
class _CachedCase(Case):
    """``model.decode`` with a :class:`KVCache` and the learner's class in every attention, on
    the tokens up to each of ``ends`` in turn. The logits must equal the uncached decoder's."""

    ends: tuple = ()
    method: str = "forward"  # the method the learner writes (the tests' learners use it)

    def run(self, cls):
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):  # or the notebook's copy
            raise TypeError("check expects your class itself, a subclass of MultiHeadAttention "
                            f"(without parentheses), got {cls!r}")
        model, src, tokens, src_mask = copy.deepcopy(self.args)
        attns = [a for layer in model.decoder.layers for a in (layer.self_attn, layer.cross_attn)]
        projected = []
        for attn in attns:
            attn.__class__ = cls  # the learner's forward on the case's weights
            attn.register_forward_hook(_Returned.hook)
            if attn.cross:
                attn.w_k.register_forward_hook(lambda *_: projected.append(1))
        logits, cache, start = [], KVCache(), 0
        with eval_mode(model):
            memory = model.encode(src, src_mask)
            for end in self.ends:
                try:
                    logits.append(model.decode(tokens[:, start:end], memory, src_mask,
                                               cache=cache))
                except _Returned as returned:
                    return returned.args[0]  # None, a tuple...: reported as it is
                except Exception:  # say what the cache holds, if that is where it went wrong
                    _check_cache(cache, attns, end, src.shape[1], len(projected), True)
                    raise
                _check_cache(cache, attns, end, src.shape[1], len(projected))
                start = end
        return torch.cat(logits, dim=1)


class _Returned(Exception):  # the learner's forward returned no tensor (None, a tuple...)
    @staticmethod
    def hook(module, inputs, output):
        if not torch.is_tensor(output):
            raise _Returned(output)


def _check_cache(cache, attns, length, S, projections, failed=False):
    """After ``length`` target positions: each attention's keys in ``cache.kv[attention]``, the
    memory's projected once (``failed``: check only the entries made so far)."""
    for key in cache.kv:
        if not any(key is attn for attn in attns):
            raise ValueError(f"the cache has an entry under {key!r}: keep each attention's keys "
                             "and values under the module itself, cache.kv[self]")
    for i, attn in enumerate(attns):
        kv, size = cache.kv.get(attn), S if attn.cross else length
        keys = kv[0] if isinstance(kv, tuple) and len(kv) == 2 and torch.is_tensor(kv[0]) else None
        wrong = keys is not None and keys.shape[1:3] != (attn.num_heads, size)
        if wrong or keys is None and not failed:
            held = "no (k, v)" if keys is None else f"keys of shape {tuple(keys.shape)}"
            raise ValueError(f"after {length} target positions the cache holds {held} for layer "
                             f"{i // 2}'s {'cross' if attn.cross else 'self'}-attention; expected "
                             f"(B, h, {size}, d_k) in cache.kv[self]")
    if projections > len(attns) // 2:
        raise ValueError(f"the memory's keys were projected {projections} times by "
                         f"{len(attns) // 2} cross-attention(s): once each, then reused")


def _kv_cases(g):
    def case(label, seed, ends=(1, 2, 3, 4, 5, 6), batch=2, layers=2):
        model, src = small_model(seed, (batch, 5), eos_bias=0.0, layers=layers)
        tokens = torch.randint(3, 12, (batch, ends[-1]), generator=g)
        src[-1, 3:], tokens[:, 0] = 0, 1  # the last source sentence padded; BOS first
        return _CachedCase(label, (model, src, tokens, padding_mask(src, 0)), ends=ends)

    return [case("2 layers, 6 tokens one at a time", 0),
            case("3 tokens at once (a prefill), then 3 one at a time", 1, (3, 4, 5, 6)),
            case("one layer, one sentence, 4 tokens", 2, (1, 2, 3, 4), batch=1, layers=1),
            case("2 tokens, then 3 at once after them, then 1", 3, (2, 5, 6))]


def _greedy(*edits, fill=None):  # greedy_decode without a cache; fill: the ended rows' token
    names = fill and {"append_tokens": slip(append_tokens, (
        "next_token.masked_fill(finished, eos_id)", fill))}
    return slip(greedy_decode, ("use_cache: bool = True", "use_cache: bool = False"), *edits,
                names=names)


def _in_turn(table, count):  # each hypothesis' own best, one hypothesis after the other
    top, index = table.topk(min(count, table.shape[1]), dim=-1)
    return top.flatten(), (index + table.shape[1] * torch.arange(len(table))[:, None]).flatten()


SUMS, END, DIV = "(sums[:, None] + log_probs)", "if token == eos_id or last_step:", "divmod(i, V)"
LOGS = ("log turns products into sums: a candidate's sum is its hypothesis' sum PLUS the new "
        "token's log-probability, sums[:, None] + log_probs")
STEPS = (  # beam_step's slips: (id, name, edits, hint)
    ("D1", "probabilities added", [(SUMS, "(sums.exp()[:, None] + log_probs.exp())")], None),
    ("D1", "probabilities multiplied", [(SUMS, "(sums.exp()[:, None] * log_probs.exp())")],
     "multiplied probabilities underflow to 0 after a few hundred tokens: " + HINTS["D1"]),
    ("D1", "log-probabilities multiplied", [(SUMS, "(sums[:, None] * log_probs)")],
     LOGS + ", not sums * log_probs."),
    ("D1", "sums not cumulative", [(SUMS, "log_probs")], LOGS + ", not the new token's alone."),
    ("D1", "ranked by the new token alone", [(SUMS, "log_probs"), (
        "= " + DIV, f"= {DIV}\n        s += sums[row].item()")], LOGS + ": rank by it."),
    (None, "sums not broadcast along the rows", [(SUMS, "(sums + log_probs)")],
     "add each hypothesis' sum to its row: sums[:, None] + log_probs, (n, 1) + (n, V)."),
    ("D2", "an ending kept in the beam", [(END, "if last_step:")], None),
    ("D2", "endings dropped", [(END, f"if token == eos_id and not last_step:\n{12 * ' '}"
                                     f"continue\n{8 * ' '}if last_step:")],
     "do not throw the candidates that end with eos_id away: the beam_size best go to ended."),
    ("D10", "best candidates hypothesis by hypothesis", [(
        "candidates.topk(min(beam_size + n, n * V))", "_in_turn(candidates.view(n, V), "
                                                      "beam_size)")], None),
    (None, "only the beam_size best looked at", [("beam_size + n,", "beam_size,")],
     "look further down than beam_size: the beam needs beam_size that do not end (n may end)."),
    (None, "an ending outside the beam_size best", [("if rank < beam_size:", "if True:")],
     "a candidate that ends counts only among the beam_size best of all: lower, it is pruned."),
    (None, "ended worst first", [("return ended,", "return ended[::-1],")],
     "return both lists best first."),
    (None, "kept not limited", [("elif len(kept) < beam_size:", "else:")],
     "kept holds at most beam_size candidates, the best that do not end: the next beam."),
    (None, "divmod swapped", [(DIV, "(i % n, i // n)")],
     "an index i of the flattened (n, V) table is row i // V, token i % V: divmod(i, V)."),
    (None, "divmod's results swapped", [("row, token = " + DIV, "token, row = " + DIV)],
     "divmod(i, V) is (i // V, i % V), the row first: row, token = divmod(i, V)."),
    (None, "divmod by n", [(DIV, "divmod(i, n)")],
     "each row of the flattened (n, V) table holds V candidates: divmod(i, V), not n."),
    (None, "the two lists swapped", [("return ended, kept", "return kept, ended")],
     "return (ended, kept): the finished candidates first, then the next beam."),
    (None, "the last step treated as any other", [(END, "if token == eos_id:")],
     "at the last step (last_step=True) every candidate ends, whatever its token: kept is empty."),
)
STEP_SLIPS = slips(beam_step, STEPS, names={"_in_turn": _in_turn})
STEP = {p.name: p.variant for p in STEP_SLIPS}


def _search(*edits, step=None):  # beam_search with edits or beam_step slip step; no early stop
    return slip(beam_search, *edits, names={"cannot_improve": lambda *args: False} | (
        {"beam_step": STEP[step]} if step else {}))


def _mask(new):  # the edit that changes the mask decode passes, before the attention
    return ATTEND, f"{new}\n    {ATTEND}"


SCORE, STORE = "s / step ** length_penalty)", "cache.kv[self] = (k, v)"
CAT = "torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)"
ATTEND, CROSS = "out, weights = self.attend(", "if self.cross and past is not None:"
OWN = "if cache is not None and not self.cross:\n        mask = causal_mask"
GIVEN = ": keep the mask decode passes you, the last T rows of causal_mask(t + T)."
GREEDY = (
    ("D5", "the first position's logits", _greedy(("logits[:, -1]", "logits[:, 0]")), None),
    ("D6", "no padding after EOS", _greedy(fill="next_token"), None),
    ("D6", "no early stop", _greedy(("if finished.all():", "if False:")), None),
    ("D6", "rows padded with 0 after EOS", _greedy(fill="next_token.masked_fill(finished, 0)"),
     "after EOS a row gets eos_id again (as the course does), not 0."),
    (None, "stops when any row ends", _greedy(("finished.all()", "finished.any()")),
     "stop when every row has produced eos_id (finished.all()), not when the first does."),
    ("D4", "no padding mask", _greedy(("encode(src, src_mask)", "encode(src)"),
                                      ("memory, src_mask,", "memory,")),
     "pass src_mask to model.encode and to every model.decode: without it the padded "
     "sentence reads its pads, and its translation depends on the batch."),
    (None, "a step short", _greedy(("range(max_len)", "range(max_len - 1)")),
     "run up to max_len steps: a row that never ends gets max_len tokens after BOS."),
    (None, "the newest token alone", _greedy(("if use_cache else ys", "")),
     "without a cache, feed model.decode all the tokens so far, ys: the decoder needs the whole "
     "prefix (the KV cache of section 6 is what lets a step feed one token)."),
    (None, "argmin", _greedy(("argmax(dim=-1)", "argmin(dim=-1)")),
     "take the most likely token: argmax over the vocabulary, not argmin."),
    ("D7", "BOS dropped", _greedy(("return ys", "return ys[:, 1:]")), None),
)
SEARCH = (
    ("D1", "probabilities added", _search(step="probabilities added"), None),
    ("D2", "finished hypotheses dropped", _search(("in ended]", "in ended if step == max_len]")),
     "do not throw finished hypotheses away: set each aside with its score, rank all at the end."),
    ("D2", "finished hypotheses extended", _search(step="an ending kept in the beam"),
     "do not throw finished hypotheses away, nor extend them: " + HINTS["D2"]),
    ("D10", "best candidates beam by beam", _search(step="best candidates hypothesis by "
                                                         "hypothesis"), None),
    ("D3", "stopped at the first ending", _search(("kept or", "kept or ended or")), None),
    ("D3", "stopped at beam_size endings", _search(("kept or", "kept or len(finished) >= "
                                                                "beam_size or")),
     "beam_size finished hypotheses are not enough to stop: " + HINTS["D3"]),
    (None, "the cache not reordered", _search(("cache.reorder(rows)", "pass")),
     "reorder the cache like the tokens, cache.reorder(rows): its row i is hypothesis i."),
    (None, "the tokens not reordered", _search(("[tokens[rows],", "[tokens,")),
     "new hypothesis i extends the row kept[i] came from: torch.cat([tokens[rows], ...])."),
    *((None, name, _search(step=name), "your beam_step: " + hint) for _, name, _, hint in STEPS
      if name in ("divmod swapped", "an ending outside the beam_size best")),
    (None, "length penalty on the beam's sums", _search(("tokens = torch.cat", "sums = sums / "
                                                         "step ** length_penalty\n            "
                                                         "tokens = torch.cat")),
     "divide only a finished hypothesis' score by the length penalty: the beam keeps plain sums."),
    (None, "length without EOS", _search((SCORE, "s / max(step - 1, 1) ** length_penalty)")),
     "the length in the penalty counts the <eos>: len(tokens), with eos_id in tokens."),
    (None, "length with BOS", _search((SCORE, "s / (step + 1) ** length_penalty)")),
     "the length in the penalty counts the generated tokens, <eos> in, <bos> out: len(tokens)."),
    (None, "BOS in the tokens", _search(("tokens[row, 1:]", "tokens[row]")),
     "leave <bos> out of a finished hypothesis' tokens: only the generated ids."),
    (None, "not sorted", _search(("sorted(finished, key=lambda pair: pair[1], reverse=True)",
                                  "finished")),
     "return the finished hypotheses best first: sorted by score, highest first."),
    (None, "worst first", _search(("reverse=True", "reverse=False")),
     "return the best first: sorted by score with reverse=True, highest first."),
    (None, "more than beam_size", _search(("True)[:beam_size]", "True)")),
     "return beam_size of them at most: the best beam_size finished hypotheses."),
    (None, "no last step", _search(("last_step=step == max_len", "last_step=False")),
     "pass last_step=True to beam_step at step max_len: hypotheses that never end are kept."),
    (None, "EOS left out of the tokens", _search(("[token], s", "[token] * (token != eos_id), s")),
     "keep eos_id at the end of a finished hypothesis' tokens: the length counts it."),
    ("D11", "length penalty left out of the ranking", _search((SCORE, "s)")), None),
)
CACHED = slips(MultiHeadAttention, [  # edits in the cache lines of its forward
    ("D8", "cache replaced, not extended", (CAT, "k, v"), None),
    ("D8", "keys never stored", (STORE, "pass"),
     "store the keys and values in the cache, cache.kv[self] = (k, v): the next call reads them."),
    (None, "the new keys before the stored ones", (CAT, "torch.cat([k, past[0]], dim=2), "
                                                        "torch.cat([v, past[1]], dim=2)"),
     "the stored positions come first, torch.cat([past_k, k], dim=2): key j is position j."),
    (None, "extended along another axis", (CAT, CAT.replace("=2", "=1")),
     "the positions are axis 2 of the (B, h, t, d_k) keys and values: dim=2."),
    ("D13", "the memory projected at every call", (CROSS, "if False:"), None),
    ("D13", "the memory projected again, not appended", [(CROSS, "if False:"), (
        "if past is not None:  #", "if past is not None and not self.cross:  #")], None),
    (None, "one cache entry for all layers", [("kv.get(self)", "kv.get(self.cross)"), (
        STORE, "cache.kv[self.cross] = (k, v)")],
     "key the cache by the module, cache.kv[self]: each attention has its own keys."),
    ("D4", "every mask dropped with a cache", _mask("mask = mask if cache is None else None"),
     "with a cache, keep the mask you are given: without it, as if you forgot to pass "
     "memory_mask to the cross-attention: the new tokens read the padded source positions."),
    ("D9", "no look-ahead mask with a cache", _mask("mask = None if cache and not self.cross "
                                                    "else mask"), None),
    ("D9", "the look-ahead mask's first rows", _mask(OWN + "(k.shape[2])[None, None, :q.shape[2]]"),
     "the new tokens are the LAST T of the t + T positions" + GIVEN),
    ("D9", "a (T, T) look-ahead mask", _mask(OWN + "(q.shape[2])[None, None]"),
     "the new tokens' queries meet the keys of all t + T positions, (1, 1, T, t + T)" + GIVEN),
    ("D12", "a 2-D look-ahead mask", _mask(OWN + "(k.shape[2])[k.shape[2] - q.shape[2]:]"), None),
], names={"causal_mask": causal_mask})
EXERCISES: dict[str, Exercise] = {
    "greedy_decode": Exercise(greedy_decode, _greedy_cases, tuple(Pitfall(*p) for p in GREEDY),
                              (greedy_decode, append_tokens), ("tokens",)),
    "beam_step": Exercise(beam_step, _beam_step_cases, STEP_SLIPS, (beam_step,), (
        "ended (row, token)", "ended sums", "kept (row, token)", "kept sums")),
    "beam_search": Exercise(beam_search, _beam_cases, tuple(Pitfall(*p) for p in SEARCH),
                            (beam_search, beam_step), ("tokens", "scores")),
    "kv_cache_decode": Exercise(MultiHeadAttention, _kv_cases, CACHED,
                                (MultiHeadAttention.forward,), ("logits",)),
}
