"""Generation with a GPT (notebook 12): sampling filters, the next token, and the loop that
continues a batch of prompts with the KV cache. Shapes: ``B`` batch, ``P`` prompt, ``V`` vocabulary.
"""

import torch

from .attention import KVCache
from .checks import check_sizes
from .data import EOS_ID
from .decoding import append_tokens, eval_mode
from .gpt import GPT


def check_sampling(temperature, top_k, top_p) -> None:
    """:func:`filter_logits`' settings: ``temperature > 0``, ``top_k`` a whole number >= 1,
    ``top_p`` in [0, 1] (None: that filter is off)."""
    if not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"temperature must be > 0 (use greedy decoding for 0), got {temperature}")
    if top_k is not None:
        check_sizes("filter_logits", top_k=top_k)  # top_k=0 would keep no token at all
    if top_p is not None and not (isinstance(top_p, (int, float)) and 0 <= top_p <= 1):
        raise ValueError(f"filter_logits: top_p must be a probability in [0, 1], got {top_p!r}")


def filter_logits(logits: torch.Tensor, temperature: float = 1.0, top_k=None, top_p=None):
    """Next-token logits ``(B, V)`` divided by ``temperature``, then only the ``top_k`` largest
    kept, then only the smallest set of most likely tokens whose probabilities reach ``top_p``
    (the token that crosses ``top_p`` is kept); the others become ``-inf``."""
    check_sampling(temperature, top_k, top_p)
    logits = logits / temperature
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        ordered, index = logits.sort(dim=-1, descending=True)  # (B, V) most likely first
        probs = ordered.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # mass of the tokens ranked above each one
        drop = before >= top_p  # the tokens above already reach top_p: this one is not needed
        drop[..., 0] = False  # never empty: the most likely token stays (top_p = 0: greedy)
        ordered = ordered.masked_fill(drop, float("-inf"))
        logits = torch.empty_like(logits).scatter_(-1, index, ordered)  # back in vocab order
    return logits


def sample_next(logits: torch.Tensor, temperature: float = 0.0, top_k=None, top_p=None,
                generator=None) -> torch.Tensor:
    """The next token of each row of ``logits (B, V)`` -> ``(B,)``: the most likely one for
    ``temperature=0`` (greedy), else one drawn with ``generator`` after :func:`filter_logits`."""
    if temperature == 0:
        check_sampling(1.0, top_k, top_p)  # unused by greedy decoding, but still settings
        return logits.argmax(dim=-1)
    probs = filter_logits(logits, temperature, top_k, top_p).softmax(dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


def check_prompt_fits(model: GPT, length: int, where: str) -> None:
    """A prompt of ``length`` tokens must leave at least one position of the model's
    ``max_len`` for a new token (an empty prompt has nothing to continue)."""
    if length < 1:
        raise ValueError(f"{where}: a prompt needs at least one token (<sep> at least), got none")
    if length >= model.config.max_len:
        raise ValueError(f"{where}: the prompt has {length} tokens, but the model has positions "
                         f"0..{model.config.max_len - 1} (max_len={model.config.max_len}), so "
                         f"there is no room for a new token; shorten the prompt to at most "
                         f"{model.config.max_len - 1} tokens")


@torch.no_grad()
def generate_tokens(model: GPT, prompt: torch.Tensor, max_new: int, temperature: float = 0.0,
                    top_k=None, top_p=None, generator=None, use_cache: bool = True):
    """``prompt (B, P)``, prompts of one length, -> ``(B, P + n)``: each row continued by
    ``n <= max_new`` tokens of :func:`sample_next`, never beyond ``model.config.max_len``. A row
    that has written ``<eos>`` gets ``<eos>`` after it; the loop stops when every row has.
    ``use_cache``: the prompt goes through the model once (the prefill), then each new token
    alone, with a ``KVCache``; otherwise the whole sequence goes through it at every step."""
    check_prompt_fits(model, prompt.shape[-1], "generate_tokens")
    out, cache = prompt, (KVCache() if use_cache else None)
    finished = torch.zeros(len(prompt), dtype=torch.bool, device=prompt.device)
    for _ in range(min(max_new, model.config.max_len - prompt.shape[1])):
        new = out if cache is None or cache.length == 0 else out[:, -1:]  # prefill, then 1
        logits = model(new, cache=cache)  # (B, len(new), V)
        next_token = sample_next(logits[:, -1], temperature, top_k, top_p, generator)  # (B,)
        out, finished = append_tokens(out, next_token, finished, EOS_ID)  # (B, t + 1)
        if finished.all():
            break
    return out


def generate(model: GPT, prompts: list, max_new: int, temperature: float = 0.0, top_k=None,
             top_p=None, generator=None, use_cache: bool = True) -> list:
    """Continue each prompt (a list of ids) by at most ``max_new`` tokens, up to ``<eos>``, with
    :func:`generate_tokens` (greedy for ``temperature=0``); prompts of one length are continued
    together, as one batch. Returns the new ids of each prompt (without ``<eos>``), in order."""
    check_sizes("generate", max_new=max_new)
    if torch.is_tensor(prompts):  # (B, P) ids: a list of P ids per prompt
        prompts = prompts.tolist()
    for ids in prompts:  # before any work: every prompt leaves room for a new token
        check_prompt_fits(model, len(ids), "generate")
    by_length, results = {}, [None] * len(prompts)
    for i, ids in enumerate(prompts):
        by_length.setdefault(len(ids), []).append(i)
    device = next(model.parameters()).device
    with eval_mode(model):
        for length, rows in by_length.items():
            prompt = torch.tensor([prompts[i] for i in rows], device=device)  # (b, length)
            out = generate_tokens(model, prompt, max_new, temperature, top_k, top_p, generator,
                                  use_cache)
            for row, ids in zip(rows, out[:, length:].tolist(), strict=True):
                results[row] = ids[:ids.index(EOS_ID)] if EOS_ID in ids else ids
    return results
