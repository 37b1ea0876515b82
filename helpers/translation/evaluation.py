"""Translating strings with a trained model, and scoring the translations. Used from notebook 09.

* :func:`translate`: English strings -> French strings by greedy decoding, with a warning (or,
  ``strict``, an error) for what the model cannot translate well;
* :func:`exact_match` and :func:`bleu`: the two scores the course reports;
* :func:`evaluate`: both scores of a model on a list of (english, french) pairs.
"""

import warnings
from typing import Optional

from ..checks import check_sizes
from ..data import BOS_ID, EOS_ID, PAD_ID, Vocab, pad
from ..decoding import greedy_decode
from ..masks import padding_mask
from ..model import Transformer
from .lexicon import LONGEST_SENTENCE


def translate(model: Transformer, sentences: list, src_vocab: Vocab, tgt_vocab: Vocab,
              max_len: Optional[int] = None, batch_size: int = 250, device=None,
              strict: bool = False) -> list:
    """Greedy translations of English strings, decoded by batches with a source padding mask.

    Each sentence is first normalised with :meth:`Vocab.normalize <helpers.data.Vocab.normalize>`
    ("The cat eats a cake." is translated as "the cat eats a cake").

    What the model cannot translate well gets a ``UserWarning`` (a ``ValueError`` with
    ``strict=True``) instead of a fluent wrong answer: words the vocabulary lacks (they become
    ``<unk>``; the warning names them), sentences longer than any in the course's corpus
    (``LONGEST_SENTENCE`` words: the model has never seen one, and tends to stop early), and
    translations cut at ``max_len`` tokens before ``<eos>``. A sentence longer than the
    model's positional encoding is a ``ValueError`` either way.

    ``max_len`` caps the generated tokens (default: the longest source length + 10).
    """
    if isinstance(sentences, str):
        raise ValueError("translate expects a list of sentences, got one string; wrap it: [s]")
    if max_len is not None:
        check_sizes("translate", max_len=max_len)
    check_sizes("translate", batch_size=batch_size)
    normalized = [src_vocab.normalize(s) for s in sentences]
    _report(strict, [f"sentence {i} ({s!r}): {', '.join(map(repr, unknown))}"
                     for i, s in enumerate(normalized) if (unknown := src_vocab.unknown_words(s))],
            "words the source vocabulary does not know become <unk>, and the translation will "
            "be wrong")
    _report(strict, [f"sentence {i} has {len(s.split())} words" for i, s in enumerate(normalized)
                     if len(s.split()) > LONGEST_SENTENCE],
            f"the course's corpus has at most {LONGEST_SENTENCE} words per sentence, so the "
            "model has never seen one this long: expect a short or wrong translation")
    device = device or next(model.parameters()).device
    results, cut = [], []
    for start in range(0, len(normalized), batch_size):
        src = pad([src_vocab.encode(s) for s in normalized[start:start + batch_size]]).to(device)
        limit = src.shape[1] + 10 if max_len is None else max_len
        out = greedy_decode(model, src, limit, BOS_ID, EOS_ID, padding_mask(src, PAD_ID))
        results += [tgt_vocab.decode(row) for row in out]  # (B, <= limit + 1) -> strings
        ended = (out[:, 1:] == EOS_ID).any(dim=1)  # (B,) False: stopped by the limit
        cut += [f"sentence {start + i} (max_len={limit})"
                for i in (~ended).nonzero().flatten().tolist()]
    _report(strict, cut, "the translation reached max_len tokens without <eos>: it is cut short "
            "(pass a larger max_len), or the model repeats itself")
    return results


def _report(strict: bool, problems: list, why: str) -> None:
    """One warning (or, with ``strict``, one ValueError) for all ``problems`` of a call."""
    if problems:
        message = f"translate: {why}: {'; '.join(problems)}"
        if strict:
            raise ValueError(message)
        warnings.warn(message, UserWarning, stacklevel=3)


def _check_pairs(hypotheses: list, references: list):
    if len(hypotheses) != len(references) or not references:
        raise ValueError(f"expected as many hypotheses as references (at least one), got "
                         f"{len(hypotheses)} and {len(references)}")


def exact_match(hypotheses: list, references: list) -> float:
    """Percentage (0-100) of hypotheses identical to their reference."""
    _check_pairs(hypotheses, references)
    matches = sum(h == r for h, r in zip(hypotheses, references, strict=True))
    return 100.0 * matches / len(references)


def bleu(hypotheses: list, references: list) -> float:
    """Corpus BLEU (0-100) of detokenised strings, one reference each, computed by sacrebleu.

    sacrebleu is imported here, not at the top of the module: only BLEU needs it, and Colab does
    not ship it (the first call installs it there), so every other notebook runs without it.
    """
    from ..course import install_on_colab

    _check_pairs(hypotheses, references)
    install_on_colab("sacrebleu")
    try:
        import sacrebleu
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            "BLEU needs the sacrebleu package: pip install 'sacrebleu==2.6.0' (on Colab the "
            "install was tried just now: is the runtime connected?)") from error
    return sacrebleu.corpus_bleu(hypotheses, [references]).score


def evaluate(model: Transformer, pairs: list, src_vocab: Vocab, tgt_vocab: Vocab) -> dict:
    """``{"exact_match": ..., "bleu": ...}`` of greedy translations of (english, french) pairs."""
    hypotheses = translate(model, [en for en, _ in pairs], src_vocab, tgt_vocab)
    references = [fr for _, fr in pairs]
    return {"exact_match": exact_match(hypotheses, references),
            "bleu": bleu(hypotheses, references)}
