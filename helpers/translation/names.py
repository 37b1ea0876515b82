"""Names for notebook 14: sentences whose subject is a name (``kalo``) that the translator must
copy; every test name is a word the model has never seen."""

import random
import warnings
from dataclasses import dataclass
from functools import partial

from ..data import Vocab
from ..tokens import BPE
from ..training import load_checkpoint
from .corpus import Corpus, _sample_split
from .evaluation import exact_match, translate
from .lexicon import noun_adjective_pairs
from .translator import ASSET_PATH, train_translator

SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]  # the training names' syllables
NEW_SYLLABLES = [c + v for c in "chjw" for v in "aeiou"]  # in no training name
NAMED_MERGES, NAMED_STEPS = 1000, 400  # notebook 14's BPE merges and training steps
PRONOUNS = {"he": "il", "she": "elle"}
# Notebook 14's three translators, each changing one thing from the one before:
NAMED_KINDS = {
    "words": "word-level vocabularies, notebook 09's model",
    "subwords": "one BPE vocabulary for both languages, the same model",
    "tied": "the same BPE, one matrix for both embeddings and the output projection",
}
NAMED_ASSETS = {kind: ASSET_PATH.with_name(f"nb14_{kind}.pt") for kind in NAMED_KINDS}


def make_names(rng: random.Random, count: int, exclude=(), syllables=(2, 3),
               alphabet=SYLLABLES) -> list:
    """``count`` distinct names of ``syllables`` syllables of ``alphabet``, none in ``exclude``."""
    names, exclude = [], set(exclude)
    while len(names) < count:
        name = "".join(rng.choice(alphabet) for _ in range(rng.choice(syllables)))
        if name not in exclude:
            names.append(name)
            exclude.add(name)
    return names


def with_name(pair: tuple, name: str):
    """``pair`` with ``name`` as its subject if the subject is *he* / *she*, else None."""
    english, french = pair
    first, _, rest = english.partition(" ")
    if not rest or PRONOUNS.get(first) != french.partition(" ")[0]:
        return None
    return f"{name} {rest}", f"{name} {french.split(' ', 1)[1]}"


@dataclass
class NamedCorpus:
    """Notebook 14's data: training pairs with names, and three test sets of pairs."""

    train: list  # the corpus's training pairs, *he* / *she* replaced by names
    ordinary: list  # the corpus's test split, no names
    names: list  # new sentences, each with an unseen name made of the training syllables
    new_syllables: list  # the same sentences, names made of NEW_SYLLABLES
    train_names: list  # the names drawn for training (not all of them are used)
    test_names: list  # unseen names, training syllables
    new_names: list  # unseen names, new syllables

    def tests(self) -> dict:
        return {"ordinary": self.ordinary, "names": self.names, "new_syllables": self.new_syllables}


def name_corpus(corpus, seed: int = 0, train_names: int = 3000, test_names: int = 300,
                test_size: int = 1000, syllables=(2,)) -> NamedCorpus:
    """Notebook 14's :class:`NamedCorpus` from ``corpus``: ``test_size`` new test sentences (in no
    split of ``corpus``, no held-out combination) get one of ``test_names`` unseen names."""
    rng = random.Random(seed)
    words = {w for pair in corpus.train for s in pair for w in s.split()}
    seen = make_names(rng, train_names, exclude=words, syllables=syllables)
    unseen = make_names(rng, test_names, exclude=words | set(seen), syllables=syllables)
    new = make_names(rng, test_names, exclude=words, syllables=syllables, alphabet=NEW_SYLLABLES)
    train = [with_name(pair, rng.choice(seen)) or pair for pair in corpus.train]
    held_out = set(corpus.held_out_pairs)

    def keep(sentence):  # a he / she subject, and only combinations seen in training
        return sentence.subject in PRONOUNS and not held_out & set(noun_adjective_pairs(sentence))

    taken = set(corpus.train) | set(corpus.valid) | set(corpus.test)
    plain = _sample_split(rng, test_size, keep, taken)
    named = [with_name(pair, rng.choice(unseen)) for pair in plain]
    renamed = [with_name(pair, rng.choice(new)) for pair in plain]
    return NamedCorpus(train, list(corpus.test), named, renamed, seen, unseen, new)


def named_vocabularies(named: NamedCorpus) -> dict:
    """``{kind: (source vocabulary, target vocabulary)}`` for :data:`NAMED_KINDS`."""
    subwords = BPE([s for pair in named.train for s in pair], NAMED_MERGES, split=str.split)
    words = (Vocab.build(e for e, _ in named.train), Vocab.build(f for _, f in named.train))
    return {"words": words, "subwords": (subwords, subwords), "tied": (subwords, subwords)}


# train_translator with one matrix for both embeddings and the output projection (the paper's
# section 3.4): a source piece and the same target piece start as one vector, as copying needs.
train_shared_translator = partial(train_translator, one_matrix=True, progress=False)


def train_named(kind: str, named: NamedCorpus, vocabularies: dict, steps: int = NAMED_STEPS,
                seed: int = 0, progress: bool = False, on_step=None):
    """``(model, history)`` of one of :data:`NAMED_KINDS`, trained on ``named.train``."""
    if kind not in NAMED_KINDS:
        raise ValueError(f"expected one of {sorted(NAMED_KINDS)}, got {kind!r}")
    src, tgt = vocabularies[kind]
    corpus = Corpus(named.train, [], named.names, [], src, tgt)
    trainer = train_shared_translator if kind == "tied" else train_translator
    return trainer(corpus, steps=steps, seed=seed, progress=progress, on_step=on_step)


def named_scores(model, src, tgt, named: NamedCorpus) -> dict:
    """``{test set: (exact match %, names copied %)}`` over ``named.tests()``, greedy."""
    scores = {}
    for test, pairs in named.tests().items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a word-level model warns about every name
            outputs = translate(model, [e for e, _ in pairs], src, tgt)
        copied = None  # the % of outputs whose first word is the name
        if test != "ordinary":
            copied = 100 * sum(o.split()[:1] == e.split()[:1]
                               for o, (e, _) in zip(outputs, pairs, strict=True)) / len(pairs)
        scores[test] = (exact_match(outputs, [f for _, f in pairs]), copied)
    return scores


def load_named_translator(kind: str, device="cpu"):
    """The shipped ``kind`` translator of notebook 14, its one matrix tied again if ``"tied"``."""
    checkpoint = load_checkpoint(NAMED_ASSETS[kind], device=device)
    if kind == "tied":
        checkpoint.model.src_embed.weight = checkpoint.model.tgt_embed.weight
    return checkpoint
