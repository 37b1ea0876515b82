"""Greedy decoding, beam search and the KV cache. Taught in notebook 10. Both decoders run the
model in eval mode under ``torch.no_grad()`` and exclude no token id.
"""

import contextlib

import torch

from .attention import KVCache
from .checks import TOKEN_DTYPES, check_mask, check_sizes, check_tensor
from .model import Transformer


def check_source(src, src_mask):
    """``src (B, S)`` token ids, and a source padding mask that broadcasts to ``(B, 1, 1, S)``."""
    check_tensor(src, "src (token ids)", "(B, S)", TOKEN_DTYPES)
    check_mask(src_mask, src.shape[0], 1, src.shape[1], "src_mask (the source padding mask)")


def check_limits(model, src, max_len, bos_id, eos_id, beam_size=None) -> None:
    """Sizes >= 1, lengths within the positional table and the special ids, before decoding."""
    check_special_ids(model, bos_id, eos_id)
    sizes = {"max_len": max_len} if beam_size is None else {"beam_size": beam_size,
                                                              "max_len": max_len}
    check_sizes("decoding", **sizes)
    table = getattr(getattr(model, "positional", None), "max_len", None)
    if table is not None and max(src.shape[1], max_len) > table:
        raise ValueError(
            f"decoding: the source has {src.shape[1]} tokens and max_len={max_len} target "
            f"positions may be fed to the decoder, but the model's positional encoding covers "
            f"max_len={table} positions; decode with max_len <= {table}"
        )


def check_special_ids(model, bos_id, eos_id) -> None:
    """``bos_id`` must be an id of the target vocabulary, ``eos_id`` an int (one outside it
    is never produced: notebooks 10 and 15 time all ``max_len`` steps so)."""
    for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
        if not isinstance(value, int) or isinstance(value, bool):  # int(...) of a NumPy id
            raise TypeError(f"decoding: {name} must be a token id (an int), got {value!r}")
    vocab_size = getattr(model, "tgt_vocab_size", None)
    if vocab_size is not None and not 0 <= bos_id < vocab_size:
        raise ValueError(f"decoding: bos_id={bos_id} is not an id of the target vocabulary "
                         f"(ids 0..{vocab_size - 1}), so the decoder cannot read it")


def check_beam_source(model, src, src_mask, max_len, beam_size, bos_id, eos_id) -> None:
    """:func:`beam_search`'s input checks: one sentence ``(1, S)``, and the limits."""
    check_source(src, src_mask)
    if src.shape[0] != 1:
        raise ValueError(
            f"beam_search decodes one sentence: src must be (1, S), got {tuple(src.shape)}")
    check_limits(model, src, max_len, bos_id, eos_id, beam_size)


@contextlib.contextmanager
def eval_mode(model):
    """Eval mode and no gradients while decoding; the model's mode is restored afterwards."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        model.train(was_training)


def append_tokens(ys, next_token, finished, eos_id: int) -> tuple:
    """One step of a decoding loop: ``next_token (B,)`` appended to ``ys (B, t)``; a row that
    has ended (``finished (B,)``) gets ``eos_id`` again. Returns ``(ys (B, t + 1), finished)``."""
    next_token = next_token.masked_fill(finished, eos_id)  # finished rows stay at EOS
    return torch.cat([ys, next_token[:, None]], dim=1), finished | (next_token == eos_id)


def greedy_decode(model: Transformer, src, max_len: int, bos_id: int, eos_id: int,
                  src_mask=None, use_cache: bool = True) -> torch.Tensor:
    """The most likely next token, ``max_len`` times at most -> ``(B, <= max_len + 1)`` ids:
    ``bos_id`` first, ``eos_id`` after a row's end, early stop when all rows ended. ``use_cache``:
    feed only the newest token, reuse the others' keys and values (the KV cache)."""
    check_source(src, src_mask)
    check_limits(model, src, max_len, bos_id, eos_id)  # before decoding, not after minutes of it
    with eval_mode(model):
        memory = model.encode(src, src_mask)  # (B, S, d_model)
        ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
        finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        cache = KVCache() if use_cache else None
        for _ in range(max_len):
            new = ys[:, -1:] if use_cache else ys  # the cache holds the earlier tokens
            logits = model.decode(new, memory, src_mask, cache=cache)  # (B, 1 or t, V)
            ys, finished = append_tokens(ys, logits[:, -1].argmax(dim=-1), finished, eos_id)
            if finished.all():
                break
    return ys


def beam_step(sums, log_probs, beam_size: int, eos_id: int, last_step: bool = False) -> tuple:
    """One step of beam search over ``n`` hypotheses: ``sums (n,)`` their summed
    log-probabilities, ``log_probs (n, V)`` their next-token log-probabilities. A candidate is
    ``(row, token, sum)``. Returns ``(ended, kept)``, two lists of candidates, best first:
    ``ended``, those among the ``beam_size`` best of all that end a hypothesis (``eos_id``, or
    any token at the ``last_step``); ``kept``, the ``beam_size`` best of the others."""
    n, V = log_probs.shape
    candidates = (sums[:, None] + log_probs).flatten()  # (n * V,) log p(prefix + token)
    # at most n candidates end with EOS, so the best beam_size + n hold beam_size others
    top_sums, top_index = candidates.topk(min(beam_size + n, n * V))
    ended, kept = [], []
    for rank, (s, i) in enumerate(zip(top_sums.tolist(), top_index.tolist(), strict=True)):
        row, token = divmod(i, V)
        if token == eos_id or last_step:
            if rank < beam_size:  # an ending outside the beam_size best would be pruned
                ended.append((row, token, s))
        elif len(kept) < beam_size:
            kept.append((row, token, s))
    return ended, kept


def cannot_improve(finished, unfinished_sums, beam_size, length_penalty) -> bool:
    """With no length penalty, a score only falls as tokens are added (log p <= 0): once
    ``beam_size`` finished hypotheses beat the best unfinished one, nothing can overtake them."""
    if length_penalty != 0.0 or len(finished) < beam_size:
        return False
    kth_best = sorted((s for _, s in finished), reverse=True)[beam_size - 1]
    return kth_best >= max(unfinished_sums)


def beam_search(model: Transformer, src, beam_size: int, max_len: int, bos_id: int,
                eos_id: int, src_mask=None, length_penalty: float = 0.0) -> list:
    """Beam search for one sentence ``(1, S)`` -> up to ``beam_size`` ``(tokens, score)``, best
    first; tokens without BOS, ``score = sum(log p) / len(tokens) ** length_penalty``."""
    src = src[None] if src.dim() == 1 else src  # (S,) -> (1, S)
    check_beam_source(model, src, src_mask, max_len, beam_size, bos_id, eos_id)
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)):
        raise TypeError(f"beam_search: length_penalty must be a number, got {length_penalty!r}")
    finished = []  # (tokens, score) of the hypotheses that ended
    with eval_mode(model):
        memory = model.encode(src, src_mask)  # (1, S, d_model)
        tokens = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)  # (n, t)
        sums = torch.zeros(1, device=src.device)  # (n,) summed log-probabilities
        cache = KVCache()
        for step in range(1, max_len + 1):  # step = the length of the new hypotheses
            logits = model.decode(tokens[:, -1:], memory.expand(len(tokens), -1, -1), src_mask,
                                  cache=cache)  # (n, 1, V)
            ended, kept = beam_step(sums, logits[:, -1].log_softmax(-1), beam_size, eos_id,
                                    last_step=step == max_len)
            finished += [(tokens[row, 1:].tolist() + [token], s / step ** length_penalty)
                         for row, token, s in ended]  # the length counts EOS
            if not kept or cannot_improve(finished, [s for *_, s in kept], beam_size,
                                           length_penalty):
                break
            rows, chosen, sums = (torch.tensor(column, device=src.device)
                                  for column in zip(*kept))  # (n,) each, n <= beam_size
            tokens = torch.cat([tokens[rows], chosen[:, None]], dim=1)  # (n, t + 1)
            cache.reorder(rows)  # row i of the cache belongs to the new hypothesis i
    return sorted(finished, key=lambda pair: pair[1], reverse=True)[:beam_size]
