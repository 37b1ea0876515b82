"""Greedy decoding with a KV cache, and beam search. Taught in notebook 10.

Both decoders run the model in eval mode under ``torch.no_grad()`` (and restore its mode after),
and neither excludes any token id from generation.
"""

import torch

from .attention import TOKEN_DTYPES, check_mask, check_sizes, check_tensor
from .model import Transformer


def _check_src(src, src_mask):
    """``src (B, S)`` token ids, and a source padding mask that broadcasts to ``(B, 1, 1, S)``."""
    check_tensor(src, "src (token ids)", "(B, S)", TOKEN_DTYPES)
    check_mask(src_mask, src.shape[0], 1, src.shape[1], "src_mask (the source padding mask)")


def _check_limits(model, src, max_len, beam_size=None) -> None:
    """Whole numbers >= 1, and lengths that fit the positional table: checked before decoding,
    not after minutes of it."""
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


class _EvalMode:
    """Eval mode and no gradients while decoding; the model's mode is restored afterwards."""

    def __init__(self, model):
        self.model, self.was_training = model, model.training
        self.no_grad = torch.no_grad()

    def __enter__(self):
        self.model.eval()
        self.no_grad.__enter__()

    def __exit__(self, *exc):
        self.no_grad.__exit__(*exc)
        self.model.train(self.was_training)


def greedy_decode(model: Transformer, src, max_len: int, bos_id: int, eos_id: int,
                  src_mask=None, use_cache: bool = True) -> torch.Tensor:
    """Pick the most likely next token, ``max_len`` times at most. Returns ``(B, <= max_len + 1)``.

    Rows start with ``bos_id``; once a row has produced ``eos_id`` it is padded with ``eos_id``.
    Decoding stops early when every row has finished. With ``use_cache`` each step feeds only
    the newest token and reuses the keys and values of the earlier ones (the KV cache).
    """
    _check_src(src, src_mask)
    _check_limits(model, src, max_len)  # before decoding, not after minutes of it
    with _EvalMode(model):
        memory = model.encode(src, src_mask)  # (B, S, d_model)
        B = src.shape[0]
        ys = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
        finished = torch.zeros(B, dtype=torch.bool, device=src.device)
        cache = model.new_cache() if use_cache else None
        for _ in range(max_len):
            new_tokens = ys[:, -1:] if use_cache else ys  # (B, 1) or (B, t)
            logits = model.decode(new_tokens, memory, src_mask, cache=cache)  # (B, *, V)
            next_token = logits[:, -1].argmax(dim=-1)  # (B,)
            next_token = next_token.masked_fill(finished, eos_id)  # finished rows stay at EOS
            ys = torch.cat([ys, next_token[:, None]], dim=1)  # (B, t + 1)
            finished |= next_token == eos_id
            if finished.all():
                break
    return ys


def _reorder_cache(cache: dict, index: torch.Tensor) -> None:
    """Keep the cached keys/values of the beams that survive, in their new order."""
    for layer in cache["layers"]:
        for part in layer.values():
            for key in ("k", "v"):
                if key in part:
                    part[key] = part[key].index_select(0, index)  # (n, h, L, d_k)


def beam_search(model: Transformer, src, beam_size: int, max_len: int, bos_id: int,
                eos_id: int, src_mask=None, length_penalty: float = 0.0) -> list:
    """Beam search for **one** source sentence. Returns up to ``beam_size`` ``(tokens, score)``.

    ``tokens`` is a list of generated ids (no BOS), ending with EOS when the hypothesis
    finished; ``score = sum(log p(token)) / len(tokens) ** length_penalty`` (EOS included).
    Every step keeps the ``beam_size`` best unfinished hypotheses; those that emit EOS among
    the step's ``beam_size`` best candidates (or reach ``max_len`` tokens) are set aside.
    All beams are scored as one batch, with a KV cache reordered as beams are chosen.
    """
    if src.dim() == 1:
        src = src[None]  # (S,) -> (1, S)
    _check_src(src, src_mask)
    if src.shape[0] != 1:
        raise ValueError(
            f"beam_search decodes one sentence: src must be (1, S), got {tuple(src.shape)}")
    _check_limits(model, src, max_len, beam_size)

    def score(log_prob_sum, length):
        return log_prob_sum / length ** length_penalty

    finished = []  # (tokens, score)
    with _EvalMode(model):
        memory = model.encode(src, src_mask)  # (1, S, d_model)
        tokens = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)  # (n, t)
        sums = torch.zeros(1, device=src.device)  # (n,) summed log-probabilities
        cache = model.new_cache()
        for step in range(1, max_len + 1):
            n = tokens.shape[0]
            logits = model.decode(tokens[:, -1:], memory.expand(n, -1, -1), src_mask, cache=cache)
            log_probs = logits[:, -1].log_softmax(dim=-1)  # (n, V)
            V = log_probs.shape[-1]
            candidates = (sums[:, None] + log_probs).flatten()  # (n * V,)
            # at most n candidates end with EOS, so n + beam_size always leave enough others
            top_sums, top_index = candidates.topk(min(beam_size + n, n * V))
            keep_rows, keep_tokens, keep_sums = [], [], []
            for rank, (s, i) in enumerate(zip(top_sums.tolist(), top_index.tolist(), strict=True)):
                row, token = divmod(i, V)
                hypothesis = tokens[row, 1:].tolist() + [token]
                if token == eos_id or step == max_len:
                    if rank < beam_size:
                        finished.append((hypothesis, score(s, step)))
                elif len(keep_rows) < beam_size:
                    keep_rows.append(row)
                    keep_tokens.append(token)
                    keep_sums.append(s)
            if not keep_rows or _cannot_improve(finished, keep_sums, beam_size, length_penalty):
                break
            index = torch.tensor(keep_rows, device=src.device)
            chosen = torch.tensor(keep_tokens, device=src.device)[:, None]  # (n, 1)
            tokens = torch.cat([tokens[index], chosen], dim=1)  # (n, t + 1)
            sums = torch.tensor(keep_sums, device=src.device)
            _reorder_cache(cache, index)
    finished.sort(key=lambda pair: pair[1], reverse=True)
    return finished[:beam_size]


def _cannot_improve(finished, unfinished_sums, beam_size, length_penalty) -> bool:
    """With no length penalty, a score only falls as tokens are added (log p <= 0): once
    ``beam_size`` finished hypotheses beat the best unfinished one, nothing can overtake them."""
    if length_penalty != 0.0 or len(finished) < beam_size:
        return False
    kth_best = sorted((s for _, s in finished), reverse=True)[beam_size - 1]
    return kth_best >= max(unfinished_sums)
