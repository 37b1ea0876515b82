"""Names for notebook 14: sentences whose subject is a name the translator must copy.

A name is two syllables (``kalo``, ``mire``). :func:`with_names` puts a name in the
place of the subject pronoun *he* / *she* (*il* / *elle*), on both sides of a pair: French
copies an English name unchanged, and the rest of the sentence is the grammar's. Training and
test use different names, so every test name is a word the model has never seen; with many
training names, each seen a few times, a model learns to copy names rather than to remember them.
"""

import random

SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
# Notebook 14's subword translator (and the sweep, which retrains it): BPE merges, training steps
NAMED_MERGES, NAMED_STEPS = 1000, 400
PRONOUNS = {"he": "il", "she": "elle"}


def make_names(rng: random.Random, count: int, exclude=(), syllables=(2, 3)) -> list:
    """``count`` distinct names of ``syllables`` syllables, none of them in ``exclude``."""
    names, exclude = [], set(exclude)
    while len(names) < count:
        name = "".join(rng.choice(SYLLABLES) for _ in range(rng.choice(syllables)))
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


def name_corpus(corpus, seed: int = 0, train_names: int = 3000, test_names: int = 100,
                syllables=(2,)):
    """``(train, test, unseen)``: the corpus's training pairs with every *he* / *she* replaced
    by one of ``train_names`` names; its test pairs with *he* / *she*, each given one of
    ``test_names`` other names (``unseen``)."""
    rng = random.Random(seed)
    words = {w for pair in corpus.train for s in pair for w in s.split()}
    seen = make_names(rng, train_names, exclude=words, syllables=syllables)
    unseen = make_names(rng, test_names, exclude=words | set(seen), syllables=syllables)
    train = [with_name(pair, rng.choice(seen)) or pair for pair in corpus.train]
    test = [named for pair in corpus.test if (named := with_name(pair, rng.choice(unseen)))]
    return train, test, unseen


def train_shared_translator(corpus, steps: int = 600, batch_size: int = 128, warmup: int = 200,
                            seed: int = 0, progress: bool = False, on_step=None):
    """:func:`~.translator.train_translator` for a corpus whose two sides share one subword
    vocabulary: the source embedding, the target embedding and the output projection are one
    matrix, as in the paper (section 3.4). A source piece and the same target piece then start
    as one vector, which is what copying a name needs."""
    from dataclasses import replace
    from functools import partial

    from ..data import batches, encode_pairs
    from ..model import TransformerConfig, build_model
    from ..training import make_optimizer, train, translation_loss
    from ..utils import set_seed

    if corpus.src_vocab is not corpus.tgt_vocab:
        raise ValueError("train_shared_translator needs one vocabulary for both languages")
    config = replace(TransformerConfig.small(), tie_weights=True)
    set_seed(seed)
    model = build_model(config, len(corpus.src_vocab), len(corpus.tgt_vocab))
    model.src_embed.weight = model.tgt_embed.weight  # the third use of the one matrix
    optimizer, scheduler = make_optimizer(model, config.d_model, warmup)
    encoded = encode_pairs(corpus.train, corpus.src_vocab, corpus.tgt_vocab)
    history = train(model, batches(encoded, batch_size, seed=seed, repeat=True),
                    partial(translation_loss, label_smoothing=0.1), optimizer, scheduler,
                    max_steps=steps, clip_norm=1.0, progress=progress, on_step=on_step)
    return model.eval(), history
