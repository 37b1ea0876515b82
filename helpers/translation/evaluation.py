"""Translating strings with a trained model, and scoring the translations (from notebook 09)."""

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
    """Greedy translations of English strings (normalised first), decoded by batches, with a
    ``UserWarning`` (``ValueError`` if ``strict``) for unknown words, sentences over
    ``LONGEST_SENTENCE`` words and translations cut at ``max_len`` tokens (default: source + 10)."""
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
    """Corpus BLEU (0-100) of detokenised strings, one reference each, computed by sacrebleu
    (imported here: Colab lacks it, and the first call installs it there)."""
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
