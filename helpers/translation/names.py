"""Names for notebook 14: sentences whose subject is a name the translator must copy.

A name is two syllables (``kalo``, ``mire``). :func:`with_name` puts a name in the place of the
subject pronoun *he* / *she* (*il* / *elle*), on both sides of a pair: French copies an English
name unchanged, and the rest of the sentence is the grammar's. Training and test use different
names, so every test name is a word the model has never seen; with many training names, each
seen a few times, a model learns to copy names rather than to remember them.

Notebook 14 trains three translators on :func:`name_corpus`, one change at a time
(:data:`NAMED_KINDS`), and ships them in ``assets/`` (``python -m helpers.course --retrain-asset
nb14_words`` and so on trains them again).
"""

import random
from dataclasses import dataclass
from pathlib import Path

SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]  # the training names' syllables
NEW_SYLLABLES = [c + v for c in "chjw" for v in "aeiou"]  # in no training name
# Notebook 14's translators (and the sweep, which retrains them): BPE merges, training steps
NAMED_MERGES, NAMED_STEPS = 1000, 400
PRONOUNS = {"he": "il", "she": "elle"}

ASSETS = Path(__file__).resolve().parents[2] / "assets"
# The three translators of notebook 14, each changing one thing from the one before:
NAMED_KINDS = {
    "words": "word-level vocabularies, notebook 09's model",
    "subwords": "one BPE vocabulary for both languages, the same model",
    "tied": "the same BPE, one matrix for both embeddings and the output projection",
}
NAMED_ASSETS = {kind: ASSETS / f"nb14_{kind}.pt" for kind in NAMED_KINDS}


def make_names(rng: random.Random, count: int, exclude=(), syllables=(2, 3),
               alphabet=SYLLABLES) -> list:
    """``count`` distinct names of ``syllables`` syllables from ``alphabet``, none of them in
    ``exclude``."""
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
    """Notebook 14's data: ``train`` (the corpus's training pairs, *he* / *she* replaced by
    names), and three test sets of ``(english, french)`` pairs: ``ordinary`` (the corpus's test
    split, no names), ``names`` (new sentences, each with an unseen name made of the training
    syllables) and ``new_syllables`` (the same sentences, names made of :data:`NEW_SYLLABLES`).
    """

    train: list
    ordinary: list
    names: list
    new_syllables: list
    train_names: list  # the names drawn for training (not all of them are used)
    test_names: list  # unseen names, training syllables
    new_names: list  # unseen names, new syllables

    def tests(self) -> dict:
        return {"ordinary": self.ordinary, "names": self.names,
                "new_syllables": self.new_syllables}


def name_corpus(corpus, seed: int = 0, train_names: int = 3000, test_names: int = 300,
                test_size: int = 1000, syllables=(2,)) -> NamedCorpus:
    """Notebook 14's :class:`NamedCorpus` from the course's ``corpus``: every training pair whose
    subject is *he* / *she* gets one of ``train_names`` names; ``test_size`` new sentences with
    *he* / *she* (in no split of ``corpus``, and with no held-out combination of its test split)
    get one of ``test_names`` unseen names, once from the training syllables, once from new ones.
    """
    from .corpus import _sample_split
    from .lexicon import noun_adjective_pairs

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
    """``{kind: (source vocabulary, target vocabulary)}`` for :data:`NAMED_KINDS`: word-level
    vocabularies of the training pairs, or one BPE (:data:`NAMED_MERGES` merges, words cut at
    spaces) learned on both sides, as notebook 14 builds them."""
    from ..data import Vocab
    from ..tokens import BPE

    subwords = BPE([s for pair in named.train for s in pair], NAMED_MERGES, split=str.split)
    words = (Vocab.build(e for e, _ in named.train), Vocab.build(f for _, f in named.train))
    return {"words": words, "subwords": (subwords, subwords), "tied": (subwords, subwords)}


def train_shared_translator(corpus, steps: int = 600, batch_size: int = 128, warmup: int = 200,
                            seed: int = 0, progress: bool = False, on_step=None):
    """:func:`~.translator.train_translator` for a corpus whose two sides share one subword
    vocabulary: the source embedding, the target embedding and the output projection are one
    matrix, as in the paper (section 3.4). A source piece and the same target piece then start
    as one vector, which is what copying a name needs."""
    from .translator import train_translator

    return train_translator(corpus, steps=steps, batch_size=batch_size, warmup=warmup, seed=seed,
                            progress=progress, on_step=on_step, one_matrix=True)


def train_named(kind: str, named: NamedCorpus, vocabularies: dict, steps: int = NAMED_STEPS,
                seed: int = 0, progress: bool = False, on_step=None):
    """One of :data:`NAMED_KINDS`, trained on ``named.train`` for ``steps`` steps of 128 pairs:
    ``(model, history)``. ``"words"`` and ``"subwords"`` are :func:`~.translator.
    train_translator`; ``"tied"`` is :func:`train_shared_translator`."""
    from .corpus import Corpus
    from .translator import train_translator

    if kind not in NAMED_KINDS:
        raise ValueError(f"expected one of {sorted(NAMED_KINDS)}, got {kind!r}")
    src, tgt = vocabularies[kind]
    corpus = Corpus(named.train, [], named.names, [], src, tgt)
    trainer = train_shared_translator if kind == "tied" else train_translator
    return trainer(corpus, steps=steps, seed=seed, progress=progress, on_step=on_step)


def copied_names(outputs: list, pairs: list) -> float:
    """% of ``outputs`` (translations of ``pairs``' English) whose first word is the name."""
    right = sum(o.split()[:1] == e.split()[:1] for o, (e, _) in zip(outputs, pairs, strict=True))
    return 100 * right / len(pairs)


def named_scores(model, src, tgt, named: NamedCorpus) -> dict:
    """``{test set: (exact match %, names copied %)}`` over ``named.tests()`` (greedy
    translations; the word-level model's warnings about unknown names are silenced)."""
    import warnings

    from .evaluation import exact_match, translate

    scores = {}
    for test, pairs in named.tests().items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a word-level model warns about every name
            outputs = translate(model, [e for e, _ in pairs], src, tgt)
        copied = copied_names(outputs, pairs) if test != "ordinary" else None
        scores[test] = (exact_match(outputs, [f for _, f in pairs]), copied)
    return scores


def retrain_named(kind: str, path=None, progress: bool = True) -> dict:
    """Train notebook 14's ``kind`` translator exactly as the notebook's recipe does (seed 0,
    :data:`NAMED_STEPS` steps), save it to ``path`` (default :data:`NAMED_ASSETS`) and return its
    metadata, its scores included."""
    import time
    from dataclasses import replace

    from ..model import TransformerConfig
    from ..training import save_checkpoint
    from . import names as this  # NAMED_STEPS read at call time (a test shortens it)
    from .corpus import make_corpus
    from .translator import CORPUS_ARGS

    corpus = make_corpus(**CORPUS_ARGS)
    named = name_corpus(corpus)
    vocabularies = named_vocabularies(named)
    start = time.perf_counter()
    model, history = train_named(kind, named, vocabularies, steps=this.NAMED_STEPS,
                                 progress=progress)
    seconds = time.perf_counter() - start
    src, tgt = vocabularies[kind]
    metadata = {"kind": kind, "corpus": dict(CORPUS_ARGS), "merges": NAMED_MERGES,
                "training": {"steps": this.NAMED_STEPS, "batch_size": 128, "warmup": 200,
                             "seed": 0},
                "train_seconds": round(seconds, 1), "final_loss": history[-1],
                "scores": {test: list(score) for test, score in
                           named_scores(model, src, tgt, named).items()}}
    config = replace(TransformerConfig.small(), tie_weights=kind == "tied")
    save_checkpoint(path or NAMED_ASSETS[kind], model, config, src, tgt, metadata)
    return metadata


def load_named_translator(kind: str, device="cpu"):
    """The shipped ``kind`` translator of notebook 14 (:data:`NAMED_ASSETS`), a
    :class:`~helpers.training.Checkpoint`; the tied one has its one matrix tied again."""
    from ..training import load_checkpoint

    checkpoint = load_checkpoint(NAMED_ASSETS[kind], device=device)
    if kind == "tied":
        checkpoint.model.src_embed.weight = checkpoint.model.tgt_embed.weight
    return checkpoint
