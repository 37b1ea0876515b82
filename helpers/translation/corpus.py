"""The corpus: three splits of pairs sampled from :mod:`.lexicon`'s grammar; the test split alone
has two (noun, adjective) combinations per noun ("red cow"): compositional generalisation."""

import random
from dataclasses import dataclass

from ..checks import check_sizes
from ..data import Vocab
from .lexicon import (
    ADJECTIVES,
    NOUNS,
    fits,
    gender_comes_later,
    noun_adjective_pairs,
    random_sentence,
    render,
)


@dataclass
class Corpus:
    """The splits as ``(english, french)`` lists (a ``test`` pair has a held-out combination)."""

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
        if keep(sentence) and (pair := render(sentence)) not in seen:
            seen.add(pair)
            pairs.append(pair)
    return pairs


def make_corpus(seed: int = 0, num_train: int = 20000, num_valid: int = 500,
                num_test: int = 1000, negation: float = 0.0) -> Corpus:
    """The course's corpus, the same for the same arguments (no sentence is in two splits)."""
    check_sizes("make_corpus", num_train=num_train, num_valid=num_valid, num_test=num_test)
    rng = random.Random(seed)
    held_out = []  # two (noun, adjective) combinations per noun, kept out of training
    for noun in NOUNS:
        fitting = [a.english for a in ADJECTIVES if fits(a, noun.animate)]
        held_out += [(noun.english, adjective) for adjective in rng.sample(fitting, 2)]
    held_out_set = set(held_out)

    def is_held_out(sentence):
        return any(pair in held_out_set for pair in noun_adjective_pairs(sentence))

    seen = set()
    train = _sample_split(rng, num_train, lambda s: not is_held_out(s), seen, negation)
    valid = _sample_split(rng, num_valid, lambda s: not is_held_out(s), seen, negation)
    test = _sample_split(rng, num_test, is_held_out, seen, negation)
    return Corpus(train, valid, test, held_out, Vocab.build(en for en, _ in train),
                  Vocab.build(fr for _, fr in train))


def lookahead_split(corpus: Corpus, size: int = 600, seed: int = 0) -> list:
    """Notebook 10's harder test: ``size`` negated pairs, none in ``corpus.train``, whose French
    object starts before the noun shows its gender ("pas de grand panier")."""
    return _sample_split(random.Random(seed), size, gender_comes_later, set(corpus.train), 1.0)
