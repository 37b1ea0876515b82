"""The corpus splits, vocabularies and padded batches. Taught in notebook 09.

:func:`make_corpus` samples three splits of sentence pairs from the grammar of
:mod:`helpers.lexicon`. The test split checks **compositional generalisation**: two (noun,
adjective) combinations per noun never appear in the training or validation sentences, only in
the test sentences, while every word and every word form does appear in training.

Token ids: ``PAD_ID = 0``, ``BOS_ID = 1``, ``EOS_ID = 2``, ``UNK_ID = 3`` in every vocabulary.
Shapes: ``B`` batch, ``S`` source length, ``T`` target length.
"""

import random
from collections import Counter
from dataclasses import dataclass

import torch

from .lexicon import (
    ADJECTIVES,
    NOUNS,
    fits,
    gender_comes_later,
    noun_adjective_pairs,
    random_sentence,
    render,
)
from .masks import causal_mask, padding_mask

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")


def choose_held_out_pairs(rng: random.Random, per_noun: int = 2) -> list:
    """``per_noun`` (noun, adjective) combinations per noun, kept out of training."""
    return [(noun.english, adjective) for noun in NOUNS for adjective in
            rng.sample([a.english for a in ADJECTIVES if fits(a, noun.animate)], per_noun)]


@dataclass
class Corpus:
    """The three splits as lists of ``(english, french)`` strings, and the vocabularies.

    ``valid`` holds new sentences built like the training ones; ``test`` holds sentences that
    each use at least one ``held_out_pairs`` combination, never seen in training.
    """

    train: list
    valid: list
    test: list
    held_out_pairs: list
    src_vocab: "Vocab"  # English, built from the training split
    tgt_vocab: "Vocab"  # French

    def __repr__(self):
        return (f"Corpus(train={len(self.train)}, valid={len(self.valid)}, test={len(self.test)}, "
                f"src_vocab={len(self.src_vocab)}, tgt_vocab={len(self.tgt_vocab)})")


def _sample_split(rng, size, keep, seen, negation=0.0) -> list:
    pairs = []
    while len(pairs) < size:
        sentence = random_sentence(rng, negation)
        if keep(sentence):
            pair = render(sentence)
            if pair not in seen:
                seen.add(pair)
                pairs.append(pair)
    return pairs


def make_corpus(seed: int = 0, num_train: int = 20000, num_valid: int = 500,
                num_test: int = 1000, negation: float = 0.0) -> Corpus:
    """The course's corpus, the same for the same arguments (no sentence is in two splits)."""
    rng = random.Random(seed)
    held_out = choose_held_out_pairs(rng)
    held_out_set = set(held_out)

    def is_held_out(sentence):
        return any(pair in held_out_set for pair in noun_adjective_pairs(sentence))

    seen = set()
    train = _sample_split(rng, num_train, lambda s: not is_held_out(s), seen, negation)
    valid = _sample_split(rng, num_valid, lambda s: not is_held_out(s), seen, negation)
    test = _sample_split(rng, num_test, is_held_out, seen, negation)
    src_vocab = Vocab.build(en for en, _ in train)
    tgt_vocab = Vocab.build(fr for _, fr in train)
    return Corpus(train, valid, test, held_out, src_vocab, tgt_vocab)


def lookahead_split(corpus: Corpus, size: int = 600, seed: int = 0) -> list:
    """``size`` negated sentence pairs, none of them in ``corpus.train``, whose French object
    the decoder must start before it knows the noun's gender (:func:`~helpers.lexicon.
    gender_comes_later`): "pas de grand panier". Notebook 10's harder test, for a model trained
    on ``make_corpus(negation=...)``."""
    return _sample_split(random.Random(seed), size, gender_comes_later, set(corpus.train), 1.0)


# ---------------------------------------------------------------------------------------------
# Vocabularies and batches
# ---------------------------------------------------------------------------------------------


def tokenize(sentence: str) -> list:
    """Word-level tokens: the corpus has no punctuation, so splitting on spaces is enough."""
    if not isinstance(sentence, str) or not sentence.split():
        raise ValueError(f"expected a non-empty sentence (a string with words), got {sentence!r}")
    return sentence.split()


class Vocab:
    """Word <-> id table. Ids 0..3 are always ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>``."""

    def __init__(self, tokens: list):
        tokens = list(tokens)
        if tuple(tokens[:4]) != SPECIAL_TOKENS or len(set(tokens)) != len(tokens):
            raise ValueError(
                f"a vocabulary is a list of distinct tokens starting with {SPECIAL_TOKENS}, "
                f"got {tokens[:6]}..."
            )
        self.tokens = tokens
        self.ids = {token: i for i, token in enumerate(tokens)}
        self._by_lower = {}  # lowercase -> the vocabulary's spelling, for normalize()
        for token in tokens[len(SPECIAL_TOKENS):]:
            self._by_lower.setdefault(token.lower(), token)

    @classmethod
    def build(cls, sentences) -> "Vocab":
        """Specials first, then every word of ``sentences``, most frequent first (ties: A-Z)."""
        counts = Counter(word for sentence in sentences for word in tokenize(sentence))
        words = sorted(counts, key=lambda word: (-counts[word], word))
        return cls([*SPECIAL_TOKENS, *words])

    def __len__(self) -> int:
        return len(self.tokens)

    def __repr__(self):
        return f"Vocab({len(self)} tokens: {' '.join(self.tokens[:8])} ...)"

    def encode(self, sentence: str) -> list:
        """Word ids of a sentence, without BOS or EOS; unknown words become ``UNK_ID``."""
        return [self.ids.get(word, UNK_ID) for word in tokenize(sentence)]

    def normalize(self, sentence: str) -> str:
        """``sentence`` as the corpus writes it: no surrounding spaces, no final ``.``, ``!``
        or ``?``, and each word in the vocabulary's own case when only its case differs
        ("The cat eats a cake." -> "the cat eats a cake", "i" -> "I"). Other words stay as
        they are (see :meth:`unknown_words`)."""
        if not isinstance(sentence, str):
            raise ValueError(f"expected a sentence (a string), got {sentence!r}")
        words = sentence.strip().rstrip(".!?").split()
        return " ".join(w if w in self.ids else self._by_lower.get(w.lower(), w) for w in words)

    def unknown_words(self, sentence: str) -> list:
        """The words of ``sentence`` that the vocabulary lacks (they would become ``<unk>``)."""
        return [word for word in tokenize(sentence) if word not in self.ids]

    def decode(self, ids) -> str:
        """Ids (a list or a 1-D tensor) -> a sentence. Skips BOS and PAD, stops at EOS."""
        ids = ids.tolist() if torch.is_tensor(ids) else list(ids)
        words = []
        for i in ids:
            if not isinstance(i, int) or not 0 <= i < len(self):
                raise ValueError(
                    f"token id {i!r} is not in the vocabulary: expected an int in "
                    f"0..{len(self) - 1}"
                )
            if i == EOS_ID:
                break
            if i not in (PAD_ID, BOS_ID):
                words.append(self.tokens[i])
        return " ".join(words)


@dataclass
class Batch:
    """A padded batch for teacher forcing (notebook 07's shift right)."""

    src: torch.Tensor       # (B, S) source ids, padded with PAD_ID
    tgt_in: torch.Tensor    # (B, T) decoder input: BOS + target (shifted right)
    tgt_out: torch.Tensor   # (B, T) labels: target + EOS, PAD_ID where there is no token
    src_mask: torch.Tensor  # (B, 1, 1, S) True on real source tokens
    tgt_mask: torch.Tensor  # (B, 1, T, T) causal and padding, True = may attend

    def to(self, device) -> "Batch":
        return Batch(*(t.to(device) for t in (self.src, self.tgt_in, self.tgt_out,
                                              self.src_mask, self.tgt_mask)))

    def __len__(self) -> int:
        return self.src.shape[0]


def pad(sequences: list) -> torch.Tensor:
    """Lists of ids -> one ``(B, L)`` tensor, padded on the right with ``PAD_ID``."""
    if not sequences or not all(len(s) for s in sequences):
        raise ValueError(f"expected a non-empty list of non-empty id lists, got {sequences!r}")
    out = torch.full((len(sequences), max(map(len, sequences))), PAD_ID, dtype=torch.long)
    for row, ids in enumerate(sequences):
        out[row, :len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


def make_batch(src_ids: list, tgt_ids: list) -> Batch:
    """Source and target id lists (no BOS/EOS) -> a :class:`Batch` with its masks."""
    if len(src_ids) != len(tgt_ids):
        raise ValueError(f"expected as many targets as sources, got {len(src_ids)} "
                         f"sources and {len(tgt_ids)} targets")
    src = pad(src_ids)  # (B, S)
    tgt_in = pad([[BOS_ID, *ids] for ids in tgt_ids])  # (B, T)
    tgt_out = pad([[*ids, EOS_ID] for ids in tgt_ids])  # (B, T): tgt_in moved one step left
    T = tgt_in.shape[1]
    # (T, T) & (B, 1, 1, T) -> (B, 1, T, T): no future tokens, no padded ones
    tgt_mask = causal_mask(T) & padding_mask(tgt_in, PAD_ID)
    return Batch(src, tgt_in, tgt_out, padding_mask(src, PAD_ID), tgt_mask)


def encode_pairs(pairs: list, src_vocab: Vocab, tgt_vocab: Vocab) -> list:
    """``(english, french)`` strings -> ``(source ids, target ids)`` lists."""
    return [(src_vocab.encode(en), tgt_vocab.encode(fr)) for en, fr in pairs]


def batches(encoded: list, batch_size: int, shuffle: bool = True, seed: int = 0,
            repeat: bool = False):
    """Yield :class:`Batch` es of ``encoded`` pairs (from :func:`encode_pairs`).

    With ``shuffle`` the order is reshuffled every epoch (seeded); with ``repeat`` the
    generator never ends (the training loop decides when to stop).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    rng = random.Random(seed)
    order = list(range(len(encoded)))
    while True:
        if shuffle:
            rng.shuffle(order)
        for start in range(0, len(order), batch_size):
            chosen = [encoded[i] for i in order[start:start + batch_size]]
            yield make_batch([s for s, _ in chosen], [t for _, t in chosen])
        if not repeat:
            return
